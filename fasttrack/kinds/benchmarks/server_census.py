"""The kernel census of both server sides at a ``vllm_bench`` point: a few decode steps profiled
by each server's own torch profiler (`fasttrack.targets.profiler.ServerProfiler`, where the
server was started with ``--profiler-config``) at the point's concurrency, and the candidate's
proof counters read around its census window (the path its own counter claims for those steps),
for the switch's census proof (`census.census_proof`)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from fasttrack.kinds.benchmarks.census import SERVER_CENSUS_STEPS, harmonise_census
from fasttrack.kinds.switch.counters import Counts
from fasttrack.kinds.switch.scrape import MetricsScraper

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest
    from fasttrack.targets.protocol import OpenedSide

Census = dict[str, dict[str, Any] | None]


def census_at(
    manifest: Manifest, sides: Mapping[str, OpenedSide], batch: int, steps: int = SERVER_CENSUS_STEPS
) -> tuple[Census, dict[str, float] | None]:
    """Both sides' census at ``batch`` sequences (None for both where either side has no
    profiler) and the candidate's proof counters over its window (None without counters)."""
    profilers = {side: opened.profiler for side, opened in sides.items()}
    if any(p is None for p in profilers.values()):
        return {"baseline": None, "candidate": None}, None
    proofs = [
        s.proof for s in manifest.switches if s.proof is not None and s.proof.source == "metrics" and s.proof.metric
    ]
    scraper = MetricsScraper(sides["candidate"], proofs) if proofs else None
    counted: dict[str, float] | None = None

    def profiled(side: str) -> dict[str, Any]:
        profiler = profilers[side]
        assert profiler is not None
        return {**profiler.decode_census(batch, steps), "profiled_calls": 1}

    # Both sides at once: each server profiles and writes its trace in its own processes, and
    # the candidate's counters are read around its own window, which stock's never touches.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="census-baseline") as beside:
        stock = beside.submit(profiled, "baseline")
        before = scraper.snapshot() if scraper is not None else None
        candidate = profiled("candidate")
        if scraper is not None and before is not None:
            counted = _on_path(manifest, before, scraper.snapshot())
        found: Census = {"baseline": stock.result(), "candidate": candidate}
    return harmonise_census(found), counted


def _on_path(manifest: Manifest, before: Counts, after: Counts) -> dict[str, float]:
    """Decode steps each switch on the candidate counted on its optimised path between two reads."""
    counts: dict[str, float] = {}
    for switch in manifest.switches:
        proof = switch.proof
        if proof is None or not proof.counted or not manifest.switch_on(switch, "candidate"):
            continue
        key = f"{proof.metric}{{{proof.label or 'path'}}}"
        value = switch.path_value
        counts[value] = after.get(key, {}).get(value, 0.0) - before.get(key, {}).get(value, 0.0)
    return counts
