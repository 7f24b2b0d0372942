"""Bounds of one side's mean (for --previous and an eval's ``min_score`` floor) and length bins
by edges."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

from fasttrack.stats.paired import FAILED, PASSED, is_binary

# ---------------------------------------------------------------------------------------------
# A share of events (top-1 disagreements) against a declared maximum
# ---------------------------------------------------------------------------------------------

# TOP1_ALPHA and shown_above: fasttrack.exact (no statistics library: verification re-derives them)


def mean_bounds(values: Sequence[float], alpha: float) -> tuple[float, float] | None:
    """One-sided (1 - alpha) lower and upper bounds of a mean score: exact (Clopper-Pearson) for
    0/1 scores, Student t otherwise; None for fewer than 2 values. For ``--previous``: a candidate
    mean that dropped beyond both runs' bounds."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2 or not np.all(np.isfinite(x)):
        return None
    if is_binary(x):
        k, n = int(x.sum()), len(x)
        low = float(_st.beta.ppf(alpha, k, n - k + 1)) if k > 0 else 0.0
        high = float(_st.beta.ppf(1 - alpha, k + 1, n - k)) if k < n else 1.0
        return low, high
    se = float(x.std(ddof=1)) / math.sqrt(len(x))
    t = float(_st.t.ppf(1 - alpha, len(x) - 1))
    return float(x.mean() - t * se), float(x.mean() + t * se)


def bins_by_edges(values: Sequence[float], edges: Sequence[float]) -> list[str]:
    """Label each value with its half-open bin [e_i, e_{i+1}); values beyond the last edge get '≥e'."""
    edges = list(edges)
    labels = []
    for v in values:
        label = None
        for lo, hi in itertools.pairwise(edges):
            if lo <= v < hi:
                label = f"{_fmt(lo)}-{_fmt(hi)}"
                break
        if label is None:
            label = f"<{_fmt(edges[0])}" if v < edges[0] else f">={_fmt(edges[-1])}"
        labels.append(label)
    return labels


def bin_names(edges: Sequence[float]) -> list[str]:
    return [f"{_fmt(lo)}-{_fmt(hi)}" for lo, hi in itertools.pairwise(edges)]


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# ---------------------------------------------------------------------------------------------
# An absolute floor on one side's mean (evals ``min_score``)


@dataclass(frozen=True)
class FloorCheck:
    """Whether a mean score is below an absolute floor, decided with a one-sided bound."""

    mean: float
    upper: float  # one-sided (1 - alpha) upper confidence bound of the true mean
    floor: float
    n: int
    method: str  # clopper-pearson (0/1 scores) | t

    @property
    def status(self) -> str:
        """``failed``: even the upper bound is below the floor; ``inconclusive``: the mean is below
        but the bound reaches it; ``passed``: the mean meets the floor."""
        if self.upper < self.floor:
            return FAILED
        return "inconclusive" if self.mean < self.floor else PASSED

    def to_dict(self) -> dict:
        return {"mean": self.mean, "upper": self.upper, "min_score": self.floor, "n": self.n, "method": self.method}


def floor_check(scores: Sequence[float], floor: float, alpha: float) -> FloorCheck:
    """The mean of ``scores`` (one per item, repeats already averaged) against ``floor``: the
    upper bound is exact for 0/1 scores (Clopper-Pearson), a Student-t bound otherwise. A true
    mean at the floor is failed with probability at most ``alpha``."""
    from scipy import stats as st

    x = np.asarray(scores, dtype=float)
    n = len(x)
    if n == 0:
        return FloorCheck(float("nan"), float("inf"), floor, 0, "none")
    mean = float(x.mean())
    if is_binary(x):
        k = int(round(x.sum()))
        upper = 1.0 if k == n else float(st.beta.ppf(1 - alpha, k + 1, n - k))
        return FloorCheck(mean, upper, floor, n, "clopper-pearson")
    if n < 2:
        return FloorCheck(mean, float("inf"), floor, n, "t")
    se = float(x.std(ddof=1)) / math.sqrt(n)
    upper = mean + float(st.t.ppf(1 - alpha, n - 1)) * se if se > 0 else mean
    return FloorCheck(mean, upper, floor, n, "t")
