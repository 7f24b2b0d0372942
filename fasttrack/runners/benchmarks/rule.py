"""The where-it-works rule of one benchmark point, and the where-it-works matrix of a run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fasttrack.evidence import CheckOutcome, Status

SLOWDOWN_TOLERANCE = 0.02
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Comparison:
    ratio: float
    ratio_ci: tuple[float, float] | None
    baseline: tuple[float, ...]
    candidate: tuple[float, ...]
    ratios: tuple[float, ...]


def paired_ratio(
    baseline: Sequence[float],
    candidate: Sequence[float],
    higher_is_better: bool = True,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Comparison:
    """Median of per-pair ratios (> 1: candidate better) and a percentile-bootstrap CI of it."""
    from scipy.stats import bootstrap

    b, c = np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)
    ratios = c / b if higher_is_better else b / c
    median = float(np.median(ratios))
    ci: tuple[float, float] | None = None
    if len(ratios) >= 2:
        if np.ptp(ratios) == 0:
            ci = (median, median)
        else:
            res = bootstrap(
                (ratios,),
                np.median,
                confidence_level=confidence,
                n_resamples=4000,
                method="percentile",
                rng=np.random.default_rng(seed),
            )
            ci = (float(res.confidence_interval.low), float(res.confidence_interval.high))
    return Comparison(median, ci, tuple(map(float, b)), tuple(map(float, c)), tuple(map(float, ratios)))


def where_it_works(
    comparison: Comparison, tolerance: float = SLOWDOWN_TOLERANCE
) -> tuple[Status, str | None, str | None]:
    """The rule in the package docstring: (status, reason_code, reason)."""
    lo, hi = comparison.ratio_ci if comparison.ratio_ci else (comparison.ratio, comparison.ratio)
    if hi < 1.0:
        return (
            Status.FAILED,
            "regression",
            (
                f"the candidate is slower than stock at this in-scope point: speed-up "
                f"{comparison.ratio:.3f}x, {CONFIDENCE:.0%} CI [{lo:.3f}, {hi:.3f}] entirely below 1; "
                "narrow the declared scope or fix the path"
            ),
        )
    if comparison.ratio < 1.0 - tolerance:
        return (
            Status.NOT_RUN,
            "underpowered",
            (
                f"median speed-up {comparison.ratio:.3f}x suggests a slowdown but the CI "
                f"[{lo:.3f}, {hi:.3f}] reaches 1; run more repeats to decide"
            ),
        )
    return Status.PASSED, None, None


def where_it_works_matrix(outcomes: Sequence[CheckOutcome]) -> list[dict[str, Any]]:
    """The where-it-works matrix from benchmark outcomes: one row per benchmarked scope point.

    ``verdict``: ``faster`` (CI above 1), ``no slower`` (CI contains 1, median not below the
    tolerance), ``undecided`` (median below it, CI reaching 1), ``slower`` (CI below 1, a failure),
    or the outcome's status when nothing was measured (``not_run``, ``errored``).
    """
    rows = []
    for outcome in outcomes:
        if outcome.kind != "benchmarks":
            continue
        m = outcome.measurements or {}
        ratio, ci = m.get("ratio"), m.get("ratio_ci")
        if ratio is None:
            verdict = outcome.status.value
        elif ci and ci[1] < 1.0:
            verdict = "slower"
        elif ci and ci[0] > 1.0:
            verdict = "faster"
        elif ratio < 1.0 - m.get("slowdown_tolerance", SLOWDOWN_TOLERANCE):
            verdict = "undecided"
        else:
            verdict = "no slower"
        rows.append(
            {
                "benchmark": outcome.name,
                "point": dict(outcome.scope_point or {}),
                "metric": m.get("metric"),
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
