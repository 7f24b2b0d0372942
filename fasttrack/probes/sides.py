"""The two sides of a comparison as `ProbeTarget`s: `fasttrack.targets.sides` opens them, this
module wraps each in the adapter the probes, the speculative check and the benchmarks talk to.

An in-process factory that already returns a `ProbeTarget` (such as ``fasttrack.probes.fake:create``)
is used as it is; anything else is wrapped by `InProcessProbeTarget`; a server by `OpenAIProbeTarget`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.probes.adapters import InProcessProbeTarget, OpenAIProbeTarget
from fasttrack.probes.base import ProbeTarget
from fasttrack.targets.python.factory import accepts
from fasttrack.targets.sides import OpenedSide, Side, open_side, opened_pair

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest


def as_probe_target(manifest: Manifest, opened: OpenedSide) -> ProbeTarget:
    context = manifest.scope.context
    max_context = int(context.max_tokens) if context is not None else None
    if manifest.target.serves_http and opened.url is not None:
        openai = manifest.target.openai
        model = openai.model_name if openai else None
        return OpenAIProbeTarget(
            str(opened.url),
            name=opened.name,
            model=model,
            max_context=max_context,
            timeout_s=openai.request_timeout_s if openai else 300.0,
            concurrency=openai.concurrency if openai else 64,
            profiler=opened.profiler,
        )
    made = opened.target
    if isinstance(made, ProbeTarget):
        made.name = opened.name
        return made
    # The stock side is the reference: one prefill pass scores it (fast, and the stock path is
    # not under test); the candidate scores through its own decode path.
    scorer = getattr(made, "next_token_logprobs", None)
    through_decode = (
        False if opened.name == "baseline" and scorer is not None and accepts(scorer, "through_decode") else None
    )
    return InProcessProbeTarget(made, name=opened.name, max_context=max_context, through_decode=through_decode)


@contextmanager
def probe_side(
    manifest: Manifest,
    side: Side,
    point: Mapping[str, Any] | None = None,
    *,
    draft_length: int | None = None,
    log_dir: Path | None = None,
) -> Iterator[ProbeTarget]:
    """One side as a ProbeTarget, closed (server stopped) afterwards."""
    opened = open_side(manifest, side, point, draft_length=draft_length, log_dir=log_dir)
    try:
        yield as_probe_target(manifest, opened)
    finally:
        opened.close()


@contextmanager
def probe_pair(
    manifest: Manifest,
    point: Mapping[str, Any] | None = None,
    *,
    draft_length: int | None = None,
    log_dir: Path | None = None,
) -> Iterator[tuple[ProbeTarget, ProbeTarget]]:
    """(baseline, candidate) as ProbeTargets; ``draft_length`` applies to the candidate only.
    Opened together (`opened_pair`): a run's shared servers start at once."""
    with opened_pair(manifest, point, draft_length=draft_length, log_dir=log_dir) as (baseline, candidate):
        yield as_probe_target(manifest, baseline), as_probe_target(manifest, candidate)
