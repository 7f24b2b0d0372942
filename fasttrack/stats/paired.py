"""Paired statistics for baseline-vs-candidate evaluations.

Both sides answer the same items with the same prompts, seeds and settings, so every comparison is
paired: per item ``d_i = candidate_i - baseline_i`` (items with several samples are averaged first,
i.e. clustered by item). Pure functions and frozen dataclasses; numpy + scipy only.

The decision rule (docs/design.md "Statistics"), for a non-inferiority margin Δ and level α:

* **passed**  — the one-sided (1-α) lower bound of mean(d) is above -Δ (non-inferiority shown),
  the run is adequately powered (minimum detectable effect ≤ Δ) and the baseline is off the floor;
* **failed**  — the one-sided (1-α) upper bound of mean(d) is below -Δ (a regression larger than
  the margin is shown). A shown regression needs no power argument, so this is never suppressed;
* **not_run** — anything else: ``underpowered`` (the run cannot settle the question at this n; the
  reason says how many items are needed) or ``floor`` (the baseline scores so low that a regression
  of size Δ cannot show).

With this three-way rule the false-fail rate with no true difference is ≤ α, and at the
recommended n (``required_n``) a true drop of 2Δ is failed with probability ≈ 1-β: the distance
from -2Δ to -Δ is exactly one minimum detectable effect. A candidate is never passed on a
confidence interval that straddles the margin.

Bounds are Student-t bounds with Hall's skewness correction (one-sided flips make the differences
skewed and the plain t bound anti-conservative exactly where it matters: passing at the margin).
Sequential decisions use an anytime-valid confidence sequence (testing by betting) instead.
tests/unit/test_stats.py checks all of this against scipy/statsmodels and by simulation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as _st

PASSED = "passed"
FAILED = "failed"
NOT_RUN = "not_run"


# ---------------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------------


def cluster_by_item(item_ids: Sequence[object], scores: Sequence[float]) -> dict[object, float]:
    """Average the scores of repeated samples per item (clustered by item), keeping first-seen order."""
    sums: dict[object, float] = {}
    counts: dict[object, int] = {}
    for item, score in zip(item_ids, scores, strict=True):
        sums[item] = sums.get(item, 0.0) + float(score)
        counts[item] = counts.get(item, 0) + 1
    return {item: sums[item] / counts[item] for item in sums}


def mcnemar_exact(right_to_wrong: int, wrong_to_right: int) -> float:
    """Exact two-sided McNemar p: binomial test of the discordant pairs against 1/2."""
    discordant = right_to_wrong + wrong_to_right
    if discordant == 0:
        return 1.0
    return float(_st.binomtest(right_to_wrong, discordant, 0.5, alternative="two-sided").pvalue)


def z_sum(alpha: float, power: float) -> float:
    """z_{1-α} + z_{1-β}: the number of standard errors a detectable effect must span."""
    return float(_st.norm.ppf(1.0 - alpha) + _st.norm.ppf(power))


def planning_variance(observed_var: float, margin: float) -> float:
    """Variance used for power: the observed Var(d), but never below Δ(1-Δ).

    A sample with few or no discordant items (often: every item identical) says nothing about how a
    real drop of Δ would show. For scores in [0, 1] the most variable way to lose Δ on average is to
    lose a whole point on a fraction Δ of items, Var(d) = Δ(1-Δ); sizing n for that case keeps a
    run of identical outputs on a handful of items from passing as "precise".
    """
    return max(float(observed_var), margin * (1.0 - margin))


def required_n(var_d: float, margin: float, alpha: float, power: float = 0.8) -> int:
    """Items needed so that the minimum detectable effect is ≤ Δ: n ≥ (z_{1-α}+z_{1-β})² Var(d)/Δ².

    Guenther's correction (+ z_{1-α}²/2) accounts for estimating the variance (t instead of z).
    """
    if margin <= 0:
        raise ValueError("margin must be positive")
    za = _st.norm.ppf(1.0 - alpha)
    n = z_sum(alpha, power) ** 2 * var_d / margin**2 + za**2 / 2.0
    return max(2, math.ceil(n))


def skew_coefficient(d: np.ndarray) -> float:
    """a = γ̂/(6√n), γ̂ the sample skewness of d: the size of the t statistic's skewness term."""
    n = len(d)
    sd = float(np.std(d))
    if n < 3 or sd == 0.0:
        return 0.0
    gamma = float(np.mean((d - d.mean()) ** 3)) / sd**3
    return gamma / (6.0 * math.sqrt(n))


def hall_inverse(y: float, a: float) -> float:
    """Inverse of Hall's monotone skewness correction g(t) = t + a(1 + 2t²) + (4/3)a²t³.

    Paired differences of 0/1 scores are skewed whenever flips are one-sided (a regression flips
    right→wrong far more than wrong→right); the plain t bound is then anti-conservative on the side
    that matters (simulated false-pass rate at the margin 6-12% at n = 200-300 for α = 5%).
    Hall's transformation (P. Hall, "On the removal of skewness by transformation", JRSS-B 54,
    1992) removes the n^{-1/2} skewness term of the t statistic and stays monotone:
    g(t) = a + ((1 + 2at)³ − 1)/(6a), so g⁻¹(y) = (∛(1 + 6a(y − a)) − 1)/(2a).
    A bound at level α is d̄ − SE·g⁻¹(t_{1−α}) (lower) or d̄ − SE·g⁻¹(−t_{1−α}) (upper).
    """
    if abs(a) < 1e-12:
        return y
    return (float(np.cbrt(1.0 + 6.0 * a * (y - a))) - 1.0) / (2.0 * a)


@dataclass(frozen=True)
class Flips:
    """Discordant pairs of a 0/1 metric."""

    right_to_wrong: int  # baseline right, candidate wrong
    wrong_to_right: int  # baseline wrong, candidate right
    p_mcnemar: float


def flip_counts(baseline: np.ndarray, candidate: np.ndarray) -> Flips | None:
    """Flip counts and exact McNemar p, or None when the scores are not all 0/1."""
    if not (is_binary(baseline) and is_binary(candidate)):
        return None
    r2w = int(np.sum((baseline == 1) & (candidate == 0)))
    w2r = int(np.sum((baseline == 0) & (candidate == 1)))
    return Flips(r2w, w2r, mcnemar_exact(r2w, w2r))


def is_binary(x: np.ndarray) -> bool:
    return bool(np.all((x == 0) | (x == 1)))


def unpaired_se(baseline: np.ndarray, candidate: np.ndarray) -> float:
    """SE of the difference of means if the two sides were independent samples (for comparison only)."""
    nb, nc = len(baseline), len(candidate)
    return float(math.sqrt(np.var(baseline, ddof=1) / nb + np.var(candidate, ddof=1) / nc))


# ---------------------------------------------------------------------------------------------
# Fixed-n paired comparison
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    status: str  # passed | failed | not_run
    reason_code: str | None  # None when passed; "regression" | "underpowered" | "floor"
    reason: str


@dataclass(frozen=True)
class PairedComparison:
    """A paired non-inferiority comparison of per-item scores (candidate - baseline)."""

    n: int
    margin: float
    alpha: float
    power: float
    baseline_mean: float
    candidate_mean: float
    diff: float  # mean(d)
    sd: float  # sample sd of d
    se: float  # sd/√n (paired)
    ci_low: float  # two-sided (1-α) CI, t distribution with Hall's skewness correction
    ci_high: float
    lower_bound: float  # one-sided (1-α) lower bound
    upper_bound: float  # one-sided (1-α) upper bound
    mde: float  # (z_{1-α}+z_{1-β})·SE with the observed SE
    n_needed: int  # items for MDE ≤ Δ at the planning variance (see planning_variance)
    underpowered: bool
    at_floor: bool  # baseline mean ≤ Δ: even a candidate scoring 0 would be "within the margin"
    unpaired_se: float
    flips: Flips | None
    decision: Decision

    @property
    def status(self) -> str:
        return self.decision.status

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("flips", "decision")}
        out["p_mcnemar"] = self.flips.p_mcnemar if self.flips else None
        out["flips"] = (
            {"right_to_wrong": self.flips.right_to_wrong, "wrong_to_right": self.flips.wrong_to_right}
            if self.flips
            else None
        )
        out.update(status=self.decision.status, reason_code=self.decision.reason_code, reason=self.decision.reason)
        return {k: _finite_or_none(v) for k, v in out.items()}


def _finite_or_none(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def paired_comparison(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    margin: float,
    alpha: float = 0.05,
    power: float = 0.8,
    skew_correction: bool = True,
) -> PairedComparison:
    """Compare per-item scores (already clustered by item, same order on both sides).

    Bounds are Student-t bounds with Hall's skewness correction (see ``hall_inverse``); with
    ``skew_correction=False`` (or symmetric differences) they are exactly ``scipy.stats.ttest_rel``'s.
    """
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    if b.shape != c.shape or b.ndim != 1:
        raise ValueError("baseline and candidate must be 1-D arrays of the same length (paired by item)")
    if not (np.all(np.isfinite(b)) and np.all(np.isfinite(c))):
        raise ValueError("scores must be finite")
    if not 0 < alpha < 0.5:
        raise ValueError("alpha must be in (0, 0.5)")
    n = len(b)
    d = c - b
    if n < 2:
        return _too_few(b, c, margin, alpha, power)
    diff = float(d.mean())
    sd = float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    t1 = float(_st.t.ppf(1.0 - alpha, n - 1))
    t2 = float(_st.t.ppf(1.0 - alpha / 2.0, n - 1))
    a = skew_coefficient(d) if skew_correction else 0.0
    lower, upper = diff - se * hall_inverse(t1, a), diff - se * hall_inverse(-t1, a)
    ci_low, ci_high = diff - se * hall_inverse(t2, a), diff - se * hall_inverse(-t2, a)
    mde = z_sum(alpha, power) * se
    var_plan = planning_variance(sd**2, margin)
    n_needed = required_n(var_plan, margin, alpha, power)
    underpowered = n < n_needed  # MDE at the planning variance (t-corrected) exceeds the margin
    at_floor = float(b.mean()) <= margin
    decision = _decide(lower, upper, margin, underpowered, at_floor, n, n_needed)
    return PairedComparison(
        n=n,
        margin=margin,
        alpha=alpha,
        power=power,
        baseline_mean=float(b.mean()),
        candidate_mean=float(c.mean()),
        diff=diff,
        sd=sd,
        se=se,
        ci_low=ci_low,
        ci_high=ci_high,
        lower_bound=lower,
        upper_bound=upper,
        mde=mde,
        n_needed=n_needed,
        underpowered=underpowered,
        at_floor=at_floor,
        unpaired_se=unpaired_se(b, c),
        flips=flip_counts(b, c),
        decision=decision,
    )


def _too_few(b: np.ndarray, c: np.ndarray, margin: float, alpha: float, power: float) -> PairedComparison:
    """Fewer than 2 paired items: no variance to estimate, underpowered."""
    n = len(b)
    nan = float("nan")
    decision = Decision(NOT_RUN, "underpowered", f"only {n} paired item(s); need at least 2 to estimate a variance")
    return PairedComparison(
        n,
        margin,
        alpha,
        power,
        _mean(b),
        _mean(c),
        _mean(c - b),
        nan,
        nan,
        nan,
        nan,
        nan,
        nan,
        nan,
        required_n(planning_variance(0.0, margin), margin, alpha, power),
        True,
        _mean(b) <= margin,
        nan,
        flip_counts(b, c),
        decision,
    )


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if len(x) else float("nan")


def _decide(
    lower: float, upper: float, margin: float, underpowered: bool, at_floor: bool, n: int, n_needed: int
) -> Decision:
    if upper < -margin:
        return Decision(
            FAILED,
            "regression",
            f"candidate is worse than baseline by more than the margin {margin:g} "
            f"(upper bound of the difference {upper:.4f} < {-margin:g})",
        )
    if at_floor:
        return Decision(
            NOT_RUN,
            "floor",
            f"the baseline scores at the floor (mean ≤ margin {margin:g}), "
            "so a regression of the margin's size cannot show",
        )
    if underpowered:
        return Decision(
            NOT_RUN,
            "underpowered",
            f"underpowered: need n ≥ {n_needed} items (have {n}) to detect a drop of {margin:g}",
        )
    if lower > -margin:
        return Decision(PASSED, None, f"non-inferior: lower bound {lower:.4f} > {-margin:g}")
    return Decision(
        NOT_RUN,
        "underpowered",
        f"inconclusive: the interval [{lower:.4f}, {upper:.4f}] contains "
        f"the margin {-margin:g}; more items are needed to settle it",
    )


def compare_bins(
    baseline: Sequence[float],
    candidate: Sequence[float],
    bins: Sequence[str],
    *,
    margin: float,
    alpha: float = 0.05,
    power: float = 0.8,
    order: Sequence[str] | None = None,
) -> dict[str, PairedComparison]:
    """The paired comparison within each bin (e.g. context-length bins), in ``order`` if given.

    Each bin is tested at α. Passing the whole check requires every bin to pass (an
    intersection-union test, valid at α without correction); a regression confined to one bin
    fails that bin.
    """
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    labels = np.asarray(list(bins), dtype=object)
    names = list(order) if order is not None else list(dict.fromkeys(labels.tolist()))
    out = {}
    for name in names:
        mask = labels == name
        out[name] = paired_comparison(b[mask], c[mask], margin=margin, alpha=alpha, power=power)
    return out


def combine(decisions: Sequence[Decision]) -> Decision:
    """Overall decision of several comparisons (overall + bins): any failure fails; all must pass."""
    failed = [d for d in decisions if d.status == FAILED]
    if failed:
        return failed[0]
    not_run = [d for d in decisions if d.status != PASSED]
    if not_run:
        return not_run[0]
    if not decisions:
        return Decision(NOT_RUN, "underpowered", "nothing was compared")
    return Decision(PASSED, None, decisions[0].reason)
