"""Open the two sides of a comparison at one scope point, and close them: the one place that
turns the manifest's ``target`` into running systems. Probes, evals, divergence, the speculative
check, benchmarks and the switch's proof of path all open their sides here, through the kind of
target the manifest names (`fasttrack.targets.registry`): in-process (`fasttrack.targets.python`)
or an OpenAI-compatible server (`fasttrack.targets.openai`).

Every failure to open a side is a `TargetError` (or `TargetDependencyMissing`, its subclass for
a Python module the target's code needs and this machine lacks).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.errors import TargetError
from fasttrack.targets.pool import PooledServer, remote_acquire, remote_prestart
from fasttrack.targets.protocol import SIDES, OpenedSide, Side, TargetDependencyMissing, TargetKind
from fasttrack.targets.registry import TARGET_KINDS

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest
    from fasttrack.targets.openai.server import ServerSpec

__all__ = ["SIDES", "OpenedSide", "Side", "TargetDependencyMissing", "open_side", "opened_pair"]


def open_side(
    manifest: Manifest,
    side: Side,
    point: Mapping[str, Any] | None = None,
    *,
    draft_length: int | None = None,
    log_dir: Path | None = None,
    switch_default: bool = False,
    targets: Mapping[str, TargetKind] = TARGET_KINDS,
) -> OpenedSide:
    """One side of the manifest's target at ``point``, opened by its kind of ``targets``."""
    kind = _kind(manifest, targets)
    if kind.shared_server is not None:
        spec = kind.shared_server(manifest, side, point, draft_length)
        pooled = remote_acquire([spec])
        if pooled is not None:
            return _pooled_side(manifest, kind.name, pooled[0], log_dir, spec)
    return kind.open(manifest, side, point, draft_length, log_dir, switch_default)


def prestart_sides(
    manifest: Manifest,
    sides: Sequence[tuple[Side, int | None]],
    point: Mapping[str, Any] | None = None,
    targets: Mapping[str, TargetKind] = TARGET_KINDS,
) -> bool:
    """Where the run shares its servers, have the pool start these (side, draft length) servers
    now, all at once, for a check that opens them one after the other; elsewhere nothing. True
    when the pool started them (each then runs in its own processes, apart from the others)."""
    kind = _kind(manifest, targets)
    if kind.shared_server is None:
        return False
    return remote_prestart([kind.shared_server(manifest, side, point, draft) for side, draft in sides])


def _kind(manifest: Manifest, targets: Mapping[str, TargetKind]) -> TargetKind:
    kind = targets.get(manifest.target.kind)
    if kind is None:
        raise TargetError(f"target kind {manifest.target.kind!r} is not supported")
    return kind


def _pooled_side(
    manifest: Manifest, kind: str, server: PooledServer, log_dir: Path | None, spec: ServerSpec
) -> OpenedSide:
    """A side on the run's shared server: ``close`` leaves the server running (the pool stops it);
    a server started with its engine's torch profiler gives its kernel census (`OpenedSide.profiler`)."""
    from fasttrack.targets.build import write_side
    from fasttrack.targets.openai.side import client_for
    from fasttrack.targets.side_profiler import side_profiler

    write_side(log_dir, server.name, server.build)
    side: Side = server.name  # type: ignore[assignment]
    client = client_for(manifest, server.url)
    folder = Path(server.log_path).parent
    profiler = side_profiler(kind, spec, server.url, model=client.model, server_dir=folder)
    return OpenedSide(side, kind, client, url=server.url, logs=[Path(server.log_path)], profiler=profiler)


@contextmanager
def opened_pair(
    manifest: Manifest,
    point: Mapping[str, Any] | None = None,
    *,
    draft_length: int | None = None,
    log_dir: Path | None = None,
    targets: Mapping[str, TargetKind] = TARGET_KINDS,
) -> Iterator[tuple[OpenedSide, OpenedSide]]:
    """(baseline, candidate), both closed (servers stopped) afterwards, also on error or Ctrl-C.
    ``draft_length`` applies to the candidate only. The run's shared servers (a ``vllm`` target
    inside ``fasttrack check``) are asked for together, so that both start at once."""
    kind = _kind(manifest, targets)
    if kind.shared_server is not None:
        specs = [
            kind.shared_server(manifest, "baseline", point, None),
            kind.shared_server(manifest, "candidate", point, draft_length),
        ]
        pooled = remote_acquire(specs)
        if pooled is not None:
            yield (
                _pooled_side(manifest, kind.name, pooled[0], log_dir, specs[0]),
                _pooled_side(manifest, kind.name, pooled[1], log_dir, specs[1]),
            )
            return
    baseline = open_side(manifest, "baseline", point, log_dir=log_dir, targets=targets)
    try:
        candidate = open_side(manifest, "candidate", point, draft_length=draft_length, log_dir=log_dir, targets=targets)
        try:
            yield baseline, candidate
        finally:
            candidate.close()
    finally:
        baseline.close()
