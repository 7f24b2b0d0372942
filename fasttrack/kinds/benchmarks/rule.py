"""Benchmarks: the rule of one point (`not_slower_verdict`, the runner's own) and what
verification re-derives: the speed-up as the median of the recorded per-pair ratios, and a pass
that follows from the rule that applies at the point:

- where the manifest promises a speed-up (``expect``), the outcome must be judged against that
  promise and its lower bound (or, for a kernel count, the ratio itself) must reach it;
- elsewhere ("not slower than stock") it must be judged at the manifest's ``margin`` (never a
  looser one recorded instead) and its lower bound must reach 1 - margin; a deterministic census
  count must not lie below 1.

A failure is not re-derived: it never helps a forger, and the promise rules record their own
sequential state."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fasttrack.evidence import ARM_SEPARATOR
from fasttrack.kinds.benchmarks.measurements import BenchmarkMeasurements
from fasttrack.kinds.reading import Subject, status
from fasttrack.manifest.sections import DEFAULT_SLOWDOWN_MARGIN, in_region

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest


def not_slower_verdict(low: float, high: float, margin: float = 0.0) -> str:
    """The rule "not slower than stock" at one point from the bounds of the speed-up: failed when
    the upper bound lies below 1 - margin (slower, shown), passed when the lower bound reaches it
    (within the margin, shown), not_run otherwise (undecided). A census count is its own bounds."""
    floor = 1.0 - margin
    if high < floor:
        return "failed"
    return "passed" if low >= floor else "not_run"


def margin_for(manifest: Manifest, benchmark: str) -> float:
    """The manifest's margin for ``benchmark`` (an ablation arm ``<id>~<switch>``: its benchmark's)."""
    found = next((b for b in manifest.benchmarks if b.id == benchmark.partition(ARM_SEPARATOR)[0]), None)
    return float(getattr(found, "margin", DEFAULT_SLOWDOWN_MARGIN))


def promise_for(manifest: Manifest, benchmark: str, point: Mapping[str, Any] | None) -> float | None:
    """The speed-up the manifest promises for ``benchmark`` at ``point`` (the first region holding it)."""
    found = next((b for b in manifest.benchmarks if b.id == benchmark), None)
    for promise in getattr(found, "expect", ()) or ():
        if in_region(dict(point or {}), promise.points):
            return float(promise.min_speedup)
    return None


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    if status(outcome) != "passed":
        return []
    m = BenchmarkMeasurements.of(outcome)
    ratio = m.ratio
    if ratio is None:
        return ["passed, but it records no speed-up ratio"]
    problems = []
    pairs = m.pair_ratios
    if pairs and None not in pairs:
        median = statistics.median([p for p in pairs if p is not None])
        if abs(median - ratio) > 1e-9 * max(1.0, abs(ratio)):
            problems.append(f"its ratio {ratio:.6g} is not the median {median:.6g} of its per-pair ratios")
    low, _high = m.bounds
    promise = promise_for(subject.manifest, str(outcome.get("name")), outcome.get("scope_point"))
    counted = "census count" in str(m.interval if m.interval is not None else "")
    if promise is not None:
        if m.promise != promise:
            problems.append(
                f"it was judged against a promise of {m.raw.get('promise')}; the manifest promises {promise:g}x here"
            )
        reached = ratio >= promise if counted else (low is not None and low >= promise)
        if not reached:
            shown = f"speed-up {ratio:.3f}x" if counted else f"lower bound {low}"
            problems.append(f"passed, but its {shown} does not reach the promised {promise:g}x")
    elif counted:
        if ratio < 1.0:
            problems.append(f"passed, but its census count ratio {ratio:.3f} lies below 1 (more than stock)")
    else:
        margin = margin_for(subject.manifest, str(outcome.get("name")))
        recorded = m.margin
        if recorded is None or recorded > margin + 1e-12:
            problems.append(f"it was judged at a margin of {recorded}; the manifest's is {margin:g}")
        if low is None or not_slower_verdict(low, low, margin) != "passed":
            problems.append(
                f"passed, but its lower bound {low} does not reach 1 - {margin:g} (not shown within the margin)"
            )
    return problems
