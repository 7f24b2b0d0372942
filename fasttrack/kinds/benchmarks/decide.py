"""The rules of one benchmark point, and the where-it-works matrix of a run.

Both timing rules are one sequential test of the median per-pair speed-up against a floor X
(`fasttrack.kinds.benchmarks.speed`): passed when the anytime-valid lower bound is shown above X,
failed when the upper bound is shown below it, otherwise more pairs are timed (the runner), up to
``max_pairs``, and then not_run (``underpowered``) with about how many pairs would decide.

- **Not slower than stock** (a point no ``expect`` promise covers): X = 1 - ``margin`` (default
  5 %): the candidate must be shown no more than ``margin`` slower than stock, and fails when
  it is shown slower than that. A point estimate alone never passes.
- **Promised speed-up** X (``expect``).

Each point's decision errs with probability at most ``alpha`` per side, whenever the runner
stops; a benchmark with k points has a family-wise error of at most k x alpha (union bound),
which the evidence records beside each decision (``family``).
- A census count (kernels per layer or step, deterministic) is compared as it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fasttrack.evidence import CheckOutcome, Status
from fasttrack.kinds.benchmarks.measurements import BenchmarkMeasurements
from fasttrack.kinds.benchmarks.rule import not_slower_verdict
from fasttrack.kinds.benchmarks.speed import FAIL, PASS, Sequential, pairs_needed, sign_bounds
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
    method: str = "anytime-valid sign test (sequential)"
    pairs_needed: int | None = None
    margin: float | None = None  # "not slower than stock" by more than this share

    def measurements(self, alpha: float, family_points: int = 1) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "promise": self.promise,
            "margin": self.margin,
            "alpha": alpha,
            "interval": f"one-sided {1 - alpha:.4g} bounds of the median ratio, {self.method}",
            "pairs_needed": self.pairs_needed,
            # the union bound over the benchmark's points (module docstring)
            "family": {"points": family_points, "alpha": min(1.0, family_points * alpha)},
        }


def _bound(value: float) -> str:
    return f"{value:.3f}" if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def count_not_slower(comparison: Comparison) -> SpeedDecision:
    """A deterministic count per side (a kernel census without a promise): the candidate fails
    when it launches more than stock (ratio below 1); there is no sampling error to bound."""
    rule = "not slower than stock"
    if not_slower_verdict(comparison.ratio, comparison.ratio) == "failed":
        reason = f"the candidate's count is {1 / comparison.ratio:.3f}x stock's (a deterministic census: no interval)"
        return SpeedDecision(Status.FAILED, "regression", reason, rule, method="census count")
    return SpeedDecision(Status.PASSED, None, None, rule, method="census count")


def within_margin(
    seq: Sequential, margin: float, alpha: float, max_pairs: int, why_stopped: str | None
) -> SpeedDecision:
    """The rule "not slower than stock by more than ``margin``": the sequential test against the
    floor 1 - margin (module docstring)."""
    floor = 1.0 - margin
    rule, method = "not slower than stock", "anytime-valid sign test (sequential)"
    bounds = f"[{_bound(seq.lower)}, {_bound(seq.upper)}]"
    if seq.decision == PASS:
        return SpeedDecision(Status.PASSED, None, None, rule, None, method, margin=margin)
    if seq.decision == FAIL:
        return SpeedDecision(
            Status.FAILED,
            "regression",
            (
                f"the candidate is slower than stock by more than the declared {margin:.0%} at this in-scope point: "
                f"one-sided {1 - alpha:.4g} upper bound of the speed-up {_bound(seq.upper)} < {floor:g} after "
                f"{seq.decided_at} pairs ({seq.above} of {seq.pairs} above {floor:g}; bounds {bounds}); narrow the "
                "declared scope or fix the path"
            ),
            rule,
            None,
            method,
            margin=margin,
        )
    needed = pairs_needed(seq.above, seq.pairs, alpha)
    need = (
        f"about {needed} pairs would decide" if needed else f"the median sits at {floor:g}: no number of pairs decides"
    )
    return SpeedDecision(
        Status.NOT_RUN,
        "underpowered",
        (
            f"not shown within {margin:.0%} of stock after {seq.pairs} pairs ({why_stopped or f'max_pairs {max_pairs}'}): "
            f"{seq.above} of {seq.pairs} pairs above {floor:g}, bounds {bounds}; {need} (raise max_pairs)"
        ),
        rule,
        None,
        method,
        needed,
        margin=margin,
    )


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

    ``verdict``: ``faster`` (passed, lower bound above 1), ``no slower`` (passed: shown within the
    margin), ``undecided`` (not shown either way), ``slower`` (failed: shown slower than the
    margin allows); at a point with a promise: ``meets promise``, ``below promise`` or
    ``undecided``; or the outcome's status when nothing was measured (``not_run``, ``errored``).
    A bound the pairs could not estimate is None (infinite).
    """
    rows = []
    for outcome in outcomes:
        if outcome.kind != "benchmarks":
            continue
        m = BenchmarkMeasurements.read(outcome.measurements)
        ratio, ci = m.ratio, m.raw.get("ratio_ci")
        low, _high = m.bounds
        if ratio is None:
            verdict = outcome.status.value
        elif m.promise is not None:
            verdict = {"passed": "meets promise", "failed": "below promise"}.get(outcome.status.value, "undecided")
        elif outcome.status is Status.FAILED:
            verdict = "slower"
        elif outcome.status is Status.PASSED:
            verdict = "faster" if low is not None and low > 1.0 else "no slower"
        else:
            verdict = "undecided"
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
