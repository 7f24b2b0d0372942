"""Benchmarks: the rule of one point (`not_slower_verdict`, the runner's own) and what
verification re-derives: the speed-up as the median of the recorded per-pair ratios, and a pass
that follows from the rule that applies at the point:

- where the manifest promises a speed-up (``expect``), the outcome must be judged against that
  promise and its lower bound (or, for a kernel count, the ratio itself) must reach it;
- elsewhere ("not slower than stock") its upper bound must not lie below 1 and the ratio not
  below 1 - `SLOWDOWN_TOLERANCE` (never a looser tolerance recorded instead).

A failure is not re-derived: it never helps a forger, and the promise rules record their own
sequential state."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fasttrack.kinds.benchmarks.measurements import BenchmarkMeasurements
from fasttrack.kinds.reading import Subject, status
from fasttrack.manifest.sections import in_region

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest

SLOWDOWN_TOLERANCE = 0.02


def not_slower_verdict(ratio: float, high: float, tolerance: float = SLOWDOWN_TOLERANCE) -> str:
    """The rule "not slower than stock" at one point: failed when the upper bound of the speed-up
    lies below 1 (slower, shown), not_run when the median suggests a slowdown beyond the tolerance
    but the bound reaches 1 (undecided), passed otherwise."""
    if high < 1.0:
        return "failed"
    if ratio < 1.0 - tolerance:
        return "not_run"
    return "passed"


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
    low, high = m.bounds
    tolerance = m.slowdown_tolerance
    if tolerance is not None and tolerance > SLOWDOWN_TOLERANCE:
        problems.append(f"it records a slowdown tolerance of {tolerance:g}; the rule's is {SLOWDOWN_TOLERANCE:g}")
    promise = promise_for(subject.manifest, str(outcome.get("name")), outcome.get("scope_point"))
    if promise is not None:
        if m.promise != promise:
            problems.append(
                f"it was judged against a promise of {m.raw.get('promise')}; the manifest promises {promise:g}x here"
            )
        counted = "census count" in str(m.interval if m.interval is not None else "")
        reached = ratio >= promise if counted else (low is not None and low >= promise)
        if not reached:
            shown = f"speed-up {ratio:.3f}x" if counted else f"lower bound {low}"
            problems.append(f"passed, but its {shown} does not reach the promised {promise:g}x")
    elif not_slower_verdict(ratio, high if high is not None else ratio) != "passed":
        if high is not None and high < 1.0:
            problems.append(f"passed, but its upper bound {high:.3f} lies below 1 (slower than stock)")
        if ratio < 1.0 - SLOWDOWN_TOLERANCE:
            problems.append(f"passed, but its speed-up {ratio:.3f}x is below 1 - {SLOWDOWN_TOLERANCE:g}")
    return problems
