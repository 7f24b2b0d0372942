"""Open both sides of a comparison as raw targets, for the evals and divergence runners.

In-process targets come from the manifest's factory with the same keyword conventions as the
feature probes (``fasttrack.probes.sides.factory_options``: switch off for the baseline, on for
the candidate, device / tensor parallel / dtype from the scope point). OpenAI-compatible targets
are started from their declared command on a free port (``ManagedServer``: health wait, log kept
as an artifact, stopped afterwards) or reached at their URL.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from fasttrack.errors import TargetError


def cache_dir() -> Path:
    """Where content-addressed results live between runs: $FASTTRACK_CACHE_DIR, else the user cache."""
    if os.environ.get("FASTTRACK_CACHE_DIR"):
        return Path(os.environ["FASTTRACK_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fasttrack"


def no_cache(context: Any) -> bool:
    return bool(getattr(context, "no_cache", False)) or os.environ.get("FASTTRACK_NO_CACHE") == "1"


def baseline_identity(manifest: Any, point: Mapping[str, Any] | None) -> dict[str, Any]:
    """What makes the baseline's results what they are (the cache key's baseline part)."""
    from fasttrack.runners.eval_cache import code_identity

    target = manifest.target
    options: Any = None
    if target.kind == "python" and target.python is not None:
        from fasttrack.probes.sides import factory_options

        options = {"factory": target.python.factory, "options": factory_options(manifest, "baseline", point)}
    elif target.kind == "openai" and target.openai is not None:
        side = target.openai.baseline
        options = {"command": list(side.command or ()), "url": side.url, "env": dict(side.env), "model": target.openai.model_name}
    return {
        "model": manifest.model.id,
        "revision": manifest.model.revision,
        "code": code_identity(Path(manifest.root), list(manifest.model.code_paths)),
        "target": options,
        "scope_point": dict(point or {}),
    }


@contextmanager
def opened_targets(manifest: Any, point: Mapping[str, Any] | None, log_dir: Path) -> Iterator[tuple[Any, Any, list[Path]]]:
    """(baseline, candidate, server log paths); everything is closed or stopped afterwards."""
    logs: list[Path] = []
    with ExitStack() as stack:
        sides = []
        for side in ("baseline", "candidate"):
            target = _open(manifest, side, point, log_dir, stack, logs)
            stack.callback(_close, target)
            sides.append(target)
        yield sides[0], sides[1], logs


def _open(manifest: Any, side: str, point: Mapping[str, Any] | None, log_dir: Path, stack: ExitStack, logs: list[Path]) -> Any:
    target = manifest.target
    if target.kind == "python":
        from fasttrack.probes.sides import TargetUnavailable, open_side

        try:
            opened = open_side(manifest, side, point)
        except TargetUnavailable as exc:
            raise TargetError(str(exc)) from exc
        return getattr(opened, "target", opened)  # the factory's own object, not the probe wrapper
    if target.kind == "openai" and target.openai is not None:
        from fasttrack.targets.openai_server import (
            ManagedServer,
            OpenAITarget,
            ServerSpec,
        )

        oa = target.openai
        conf = getattr(oa, side)
        from fasttrack.probes.sides import server_command

        # the scope point's {tensor_parallel} etc. filled in, as for the probes' servers
        spec = ServerSpec(side, command=tuple(server_command(manifest, side, point, None)) if conf.command else None, url=conf.url,
                          health_path=oa.health_path, startup_timeout_s=oa.startup_timeout_s, env=dict(conf.env),
                          cwd=str(manifest.resolve_path(conf.cwd)) if conf.cwd else str(manifest.root))  # fmt: skip
        server = ManagedServer(spec, log_dir)
        stack.callback(server.stop)
        if conf.command:
            logs.append(server.log_path)
        base_url = server.start()
        return OpenAITarget(base_url, model=oa.model_name, server=server)
    raise TargetError(f"target kind {target.kind!r} cannot run evals")


def _close(target: Any) -> None:
    closer = getattr(target, "close", None)
    if callable(closer):
        closer()
