"""The rules of one benchmark point, and the where-it-works matrix of a run.

- **Not slower than stock** (a point no ``expect`` promise covers): fixed n pairs, exact sign-test
  bounds of the median ratio (`fasttrack.kinds.benchmarks.speed`): failed (``regression``) when
  the one-sided (1 - alpha) upper bound is below 1; not_run (``underpowered``) when the median is
  below 1 - `rule.SLOWDOWN_TOLERANCE` but the bound reaches 1 (`rule.not_slower_verdict`); passed otherwise.
- **Promised speed-up** X (``expect``): failed when the anytime-valid upper bound is below X,
  passed when the lower bound is above it, otherwise more pairs are timed (the runner), up to
  ``max_pairs``, and then not_run (``underpowered``) with about how many pairs would decide.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fasttrack.evidence import CheckOutcome, Status
from fasttrack.kinds.benchmarks.measurements import BenchmarkMeasurements
from fasttrack.kinds.benchmarks.rule import SLOWDOWN_TOLERANCE, not_slower_verdict
from fasttrack.kinds.benchmarks.speed import FAIL, PASS, Sequential, min_pairs, pairs_needed, sign_bounds
from fasttrack.manifest.sections import DEFAULT_SPEED_ALPHA, SpeedPromise, in_region


@dataclass(frozen=True)
class Comparison:
    ratio: float  # median of the per-pair ratios (> 1: the candidate is better)
    ratio_ci: tuple[float, float] | None  # one-sided (1 - alpha) lower and upper bounds; None: not estimated
    baseline: tuple[float, ...]
    candidate: tuple[float, ...]
    ratios: tuple[float, ...]


def pair_ratios(baseline: Sequence[float], candidate: Sequence[float], higher_is_better: bool = True) -> np.ndarray:
    b, c = np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)
    return c / b if higher_is_better else b / c


def paired_ratio(
    baseline: Sequence[float],
    candidate: Sequence[float],
    higher_is_better: bool = True,
    alpha: float = DEFAULT_SPEED_ALPHA,
) -> Comparison:
    """Median of the per-pair ratios and its exact sign-test bounds (`speed.sign_bounds`)."""
    ratios = pair_ratios(baseline, candidate, higher_is_better)
    lo, hi = sign_bounds(ratios, alpha)
    return Comparison(
        float(np.median(ratios)),
        (lo, hi) if len(ratios) else None,
        tuple(map(float, baseline)),
        tuple(map(float, candidate)),
        tuple(map(float, ratios)),
    )


@dataclass(frozen=True)
class SpeedDecision:
    """The verdict of one benchmark point and what it rests on (for the evidence)."""

    status: Status
    reason_code: str | None
    reason: str | None
    rule: str  # "not slower than stock" | "promised speed-up" | "census" (a deterministic count)
    promise: float | None = None
    method: str = "exact sign test (fixed n)"
    pairs_needed: int | None = None

    def measurements(self, alpha: float) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "promise": self.promise,
            "alpha": alpha,
            "interval": f"one-sided {1 - alpha:.4g} bounds of the median ratio, {self.method}",
            "pairs_needed": self.pairs_needed,
        }


def _bound(value: float) -> str:
    return f"{value:.3f}" if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def where_it_works(
    comparison: Comparison, tolerance: float = SLOWDOWN_TOLERANCE, alpha: float = DEFAULT_SPEED_ALPHA
) -> tuple[Status, str | None, str | None]:
    """The rule "not slower than stock" (package docstring): (status, reason_code, reason)."""
    decision = not_slower(comparison, alpha, tolerance)
    return decision.status, decision.reason_code, decision.reason


def not_slower(
    comparison: Comparison, alpha: float = DEFAULT_SPEED_ALPHA, tolerance: float = SLOWDOWN_TOLERANCE
) -> SpeedDecision:
    lo, hi = comparison.ratio_ci if comparison.ratio_ci else (comparison.ratio, comparison.ratio)
    rule = "not slower than stock"
    n = len(comparison.ratios)
    verdict = not_slower_verdict(comparison.ratio, hi, tolerance)  # the rule verification re-derives
    if verdict == "failed":
        return SpeedDecision(
            Status.FAILED,
            "regression",
            (
                f"the candidate is slower than stock at this in-scope point: speed-up {comparison.ratio:.3f}x, "
                f"one-sided {1 - alpha:.4g} upper bound {hi:.3f} < 1 over {n} pairs; narrow the declared scope or fix "
                "the path"
            ),
            rule,
        )
    if verdict == "not_run":
        needed = max(n + 1, min_pairs(alpha)) if not math.isfinite(hi) else None
        more = f"at least {needed} pairs can show a slowdown at alpha {alpha:g}" if needed else "run more repeats"
        return SpeedDecision(
            Status.NOT_RUN,
            "underpowered",
            (
                f"median speed-up {comparison.ratio:.3f}x suggests a slowdown but the bounds "
                f"[{_bound(lo)}, {_bound(hi)}] over {n} pairs reach 1; {more} to decide"
            ),
            rule,
            pairs_needed=needed,
        )
    return SpeedDecision(Status.PASSED, None, None, rule)


def promise_at(promises: Sequence[SpeedPromise], point: Mapping[str, Any]) -> SpeedPromise | None:
    """The first promise whose region contains the point (None: the point promises nothing)."""
    return next((p for p in promises if in_region(point, p.points)), None)


def promised(seq: Sequential, promise: float, alpha: float, max_pairs: int, why_stopped: str | None) -> SpeedDecision:
    """The rule of a promised speed-up, from where the sequential sign test stands."""
    rule, method = "promised speed-up", "anytime-valid sign test (sequential)"
    bounds = f"[{_bound(seq.lower)}, {_bound(seq.upper)}]"
    if seq.decision == PASS:
        return SpeedDecision(Status.PASSED, None, None, rule, promise, method)
    if seq.decision == FAIL:
        return SpeedDecision(
            Status.FAILED,
            "regression",
            (
                f"the speed-up is below the promised {promise:g}x at this in-scope point: one-sided {1 - alpha:.4g} "
                f"upper bound {_bound(seq.upper)} < {promise:g} after {seq.decided_at} pairs ({seq.above} of "
                f"{seq.pairs} above the promise; bounds {bounds}); fix the path or lower the promise"
            ),
            rule,
            promise,
            method,
        )
    needed = pairs_needed(seq.above, seq.pairs, alpha)
    need = (
        f"about {needed} pairs would decide" if needed else "the median sits at the promise: no number of pairs decides"
    )
    return SpeedDecision(
        Status.NOT_RUN,
        "underpowered",
        (
            f"undecided against the promised {promise:g}x after {seq.pairs} pairs ({why_stopped or f'max_pairs {max_pairs}'}): "
            f"{seq.above} of {seq.pairs} above it, bounds {bounds}; {need} (raise max_pairs)"
        ),
        rule,
        promise,
        method,
        needed,
    )


def where_it_works_matrix(outcomes: Sequence[CheckOutcome]) -> list[dict[str, Any]]:
    """The where-it-works matrix from benchmark outcomes: one row per benchmarked scope point.

    ``verdict``: ``faster`` (lower bound above 1), ``no slower`` (bounds contain 1, median not below
    the tolerance), ``undecided`` (median below it, bounds reaching 1), ``slower`` (upper bound below
    1, a failure); at a point with a promise: ``meets promise``, ``below promise`` or ``undecided``;
    or the outcome's status when nothing was measured (``not_run``, ``errored``). A bound the pairs
    could not estimate is None (infinite).
    """
    rows = []
    for outcome in outcomes:
        if outcome.kind != "benchmarks":
            continue
        m = BenchmarkMeasurements.read(outcome.measurements)
        ratio, ci = m.ratio, m.raw.get("ratio_ci")
        low, high = m.bounds
        if ratio is None:
            verdict = outcome.status.value
        elif m.promise is not None:
            verdict = {"passed": "meets promise", "failed": "below promise"}.get(outcome.status.value, "undecided")
        elif high is not None and high < 1.0:
            verdict = "slower"
        elif low is not None and low > 1.0:
            verdict = "faster"
        elif ratio < 1.0 - (m.slowdown_tolerance if m.slowdown_tolerance is not None else SLOWDOWN_TOLERANCE):
            verdict = "undecided"
        else:
            verdict = "no slower"
        rows.append(
            {
                "benchmark": outcome.name,
                "point": dict(outcome.scope_point or {}),
                "metric": m.metric,
                "ratio": ratio,
                "ratio_ci": ci,
                "status": outcome.status.value,
                "verdict": verdict,
            }
        )
    try:
        return sorted(rows, key=lambda r: (r["benchmark"], sorted(r["point"].items())))
    except TypeError:  # mixed value types in one dimension: fall back to text order
        return sorted(rows, key=lambda r: (r["benchmark"], sorted((k, str(v)) for k, v in r["point"].items())))
