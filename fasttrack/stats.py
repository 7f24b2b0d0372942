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

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as _st

from fasttrack.exact import TOP1_ALPHA, shown_above

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


def _finite_or_none(v):
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
    nan = float("nan")
    if n < 2:
        decision = Decision(NOT_RUN, "underpowered", f"only {n} paired item(s); need at least 2 to estimate a variance")
        return PairedComparison(
            n,
            margin,
            alpha,
            power,
            _mean(b),
            _mean(c),
            _mean(d),
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


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if len(x) else float("nan")


def _decide(lower, upper, margin, underpowered, at_floor, n, n_needed) -> Decision:
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


# ---------------------------------------------------------------------------------------------
# Anytime-valid confidence sequence and the sequential rule
# ---------------------------------------------------------------------------------------------
#
# Method: testing by betting (I. Waudby-Smith & A. Ramdas, "Estimating means of bounded random
# variables by betting", JRSS-B 86(1):1-27, 2024, arXiv:2010.09686), one-sided, with the aGRAPA
# predictable bets of their Section 5.3. For a null value m of the mean of x ∈ [0, 1] a gambler
# starts with capital 1 and bets a predictable fraction λ_t on x_t exceeding m:
#     K_t(m) = Π_{i≤t} (1 + λ_i (x_i − m)),  λ_i ∈ [0, c/m].
# If the true mean is ≤ m, K_t is a non-negative supermartingale, so by Ville's inequality
# P(sup_t K_t ≥ 1/α) ≤ α: rejecting "mean ≤ m" whenever the capital reaches 1/α keeps the error
# ≤ α at ANY data-dependent stopping time (the upper side bets the other way). The set of m not
# rejected so far is an anytime-valid confidence sequence.
# Why this method: paired differences are bounded (d ∈ [-1, 1] for scores in [0, 1]) and, on a
# clean candidate, nearly all zero. Betting adapts to that small variance (the bets grow like
# (mean − m)/variance), so clean runs settle after far fewer items than the fixed-n test; our
# first try, the closed-form predictable plug-in empirical-Bernstein CS of the same paper, needed
# about twice as many items in simulation, and a sub-Gaussian boundary (Howard et al., Ann. Stat.
# 2021) must assume the worst-case variance of [-1, 1]. Each side is one-sided at α, matching the
# fixed-n bounds.
#
# Tuning for the common fast-track case, a numerically equivalent candidate whose outputs match
# the baseline on (nearly) every item: no valid test can pass all-zero differences at margin Δ
# before (1−Δ)^n ≤ α (a candidate losing a whole point on a share Δ of items shows no change on
# n items with probability (1−Δ)^n): n ≥ 59 at Δ = α = 0.05. The paper's cap c = 0.75 and a
# unit-weight prior needed 85 items there, more than a per-bin share of a few hundred items can
# give; c = 0.85 with a quarter-weight prior needs 71. Larger caps lose more capital on a single
# flipped item, which costs clean-but-noisy runs (2% flips each way: pass rate 0.88 → 0.82 at
# n ≤ 300; c = 0.95 drops it to 0.69). Validity does not depend on either choice (any
# predictable bet in [0, 1/m) keeps K_t a supermartingale); benchmarks/stats_sequential.py shows
# the trade-off.

_BET_CAP = 0.85  # c: bets are capped at c/m (c/(1−m) for the upper side)
_PRIOR_WEIGHT = 0.25  # pseudo-items behind the bets' initial mean 1/2 and variance 1/4


def _log_capital(x: np.ndarray, m: np.ndarray | float, side: int) -> np.ndarray:
    """log K_t for x (S, T) in [0, 1] against null means m (broadcast to (S or G, 1)).

    side=+1 bets that the mean exceeds m (rejects "mean ≤ m"); side=-1 the opposite.
    """
    s, t_len = x.shape
    t = np.arange(1, t_len + 1, dtype=float)
    w = _PRIOR_WEIGHT
    mu = (0.5 * w + np.cumsum(x, axis=1)) / (t + w)
    var = (0.25 * w + np.cumsum((x - mu) ** 2, axis=1)) / (t + w)
    mu_prev = np.concatenate([np.full((s, 1), 0.5), mu[:, :-1]], axis=1)  # predictable: uses x_<t only
    var_prev = np.concatenate([np.full((s, 1), 0.25), var[:, :-1]], axis=1)
    m = np.asarray(m, dtype=float).reshape(-1, 1) if np.ndim(m) else float(m)
    gap = side * (mu_prev - m)
    cap = _BET_CAP / (m if side > 0 else 1.0 - m)
    lam = np.clip(gap / (var_prev + gap**2), 0.0, cap)  # aGRAPA: ≈ Kelly-optimal fraction
    return np.cumsum(np.log1p(side * lam * (x - m)), axis=1)


def _to_unit(d: np.ndarray, lo: float, hi: float) -> np.ndarray:
    if np.any(d < lo - 1e-12) or np.any(d > hi + 1e-12):
        raise ValueError(f"values must lie in [{lo}, {hi}]")
    return np.clip((d - lo) / (hi - lo), 0.0, 1.0)


def rejects(
    d: np.ndarray, m: float, alpha: float, *, lo: float = -1.0, hi: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Anytime-valid one-sided tests of the mean of d against m, after each item.

    Returns (above, below), boolean arrays shaped like d: ``above[..., t]`` is True once "mean ≤ m"
    has been rejected by item t (the mean is shown to exceed m), ``below`` once "mean ≥ m" has.
    """
    d = np.asarray(d, dtype=float)
    x = _to_unit(np.atleast_2d(d), lo, hi)
    mu = (m - lo) / (hi - lo)
    thr = math.log(1.0 / alpha)
    above = np.maximum.accumulate(_log_capital(x, mu, +1), axis=1) >= thr
    below = np.maximum.accumulate(_log_capital(x, mu, -1), axis=1) >= thr
    if d.ndim == 1:
        return above[0], below[0]
    return above, below


@dataclass(frozen=True)
class ConfidenceSequence:
    lower: np.ndarray  # anytime-valid one-sided (1-α) lower bound of mean(d) after each item
    upper: np.ndarray


def confidence_sequence(
    d: Sequence[float] | np.ndarray, alpha: float, *, lo: float = -1.0, hi: float = 1.0, step: float = 0.0025
) -> ConfidenceSequence:
    """The betting confidence sequence of one run, on a grid of null means (resolution ``step``).

    The bound after item t is the smallest (largest) grid value not yet rejected; monotone in t.
    """
    values = np.asarray(d, dtype=float)
    x = _to_unit(values[None, :], lo, hi)
    grid = np.arange(0.0, 1.0 + step / (hi - lo), step / (hi - lo))
    grid = np.clip(grid, 1e-6, 1.0 - 1e-6)
    thr = math.log(1.0 / alpha)
    xs = np.broadcast_to(x, (len(grid), x.shape[1]))
    rej_low = np.maximum.accumulate(_log_capital(xs, grid, +1), axis=1) >= thr  # (G, T)
    rej_high = np.maximum.accumulate(_log_capital(xs, grid, -1), axis=1) >= thr
    # lower bound: first grid value (from below) that is not rejected; upper: last one from above
    first_kept = np.argmax(~rej_low, axis=0)
    first_kept = np.where((~rej_low).any(axis=0), first_kept, len(grid) - 1)
    last_kept = len(grid) - 1 - np.argmax(~rej_high[::-1], axis=0)
    last_kept = np.where((~rej_high).any(axis=0), last_kept, 0)
    scale = hi - lo
    return ConfidenceSequence(grid[first_kept] * scale + lo, grid[last_kept] * scale + lo)


@dataclass(frozen=True)
class SequentialResult:
    decision: str  # passed | failed | inconclusive (not settled by max n)
    n_used: int
    n_max: int
    stopped_early: bool
    lower: float  # CS bounds at the stopping point
    upper: float
    looks: tuple[int, ...] = field(default=())  # n at each look

    def to_dict(self) -> dict:
        return {
            "used": True,
            "decision": self.decision,
            "n_used": self.n_used,
            "max": self.n_max,
            "stopped_early": self.stopped_early,
            "cs_lower": self.lower,
            "cs_upper": self.upper,
            "looks": list(self.looks),
        }


def sequential_decision(
    d: Sequence[float],
    *,
    margin: float,
    alpha: float,
    looks: Sequence[int],
    n_max: int | None = None,
) -> SequentialResult:
    """Look at the confidence sequence after each n in ``looks``: PASS once lower > -Δ, FAIL once
    upper < -Δ. If ``d`` ends before ``n_max`` is reached, the caller has more items to evaluate
    and the result is "continue" (decision ``inconclusive``, ``n_used`` = len(d)).

    At ``n_max`` without a verdict the result is ``inconclusive`` (→ not_run(underpowered)); it
    does NOT fall back to the fixed-n test, which after repeated looks would no longer hold its
    level.
    """
    values = np.asarray(d, dtype=float)
    n_max = n_max if n_max is not None else len(values)
    if len(values) == 0:
        return SequentialResult("inconclusive", 0, n_max, False, -1.0, 1.0, ())
    above, below = rejects(values, -margin, alpha)
    cs = confidence_sequence(values, alpha)
    seen: list[int] = []
    for n in sorted({min(int(k), len(d)) for k in looks if k >= 1}):
        seen.append(n)
        lo, hi = float(cs.lower[n - 1]), float(cs.upper[n - 1])
        if above[n - 1]:
            return SequentialResult(PASSED, n, n_max, n < n_max, lo, hi, tuple(seen))
        if below[n - 1]:
            return SequentialResult(FAILED, n, n_max, n < n_max, lo, hi, tuple(seen))
    return SequentialResult("inconclusive", len(d), n_max, False, float(cs.lower[-1]), float(cs.upper[-1]), tuple(seen))


def sequential_stop_times(
    d: np.ndarray, *, margin: float, alpha: float, looks: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised sequential rule over simulations d (sims, T): (decision codes, n used).

    Codes: 1 pass, -1 fail, 0 inconclusive at the last look.
    """
    above, below = rejects(np.atleast_2d(d), -margin, alpha)
    sims = above.shape[0]
    code = np.zeros(sims, dtype=int)
    used = np.full(sims, int(max(looks)), dtype=int)
    open_ = np.ones(sims, dtype=bool)
    for n in sorted({int(k) for k in looks}):
        p = open_ & above[:, n - 1]
        f = open_ & ~p & below[:, n - 1]
        code[p], code[f] = 1, -1
        used[p | f] = n
        open_ &= ~(p | f)
    return code, used


def decision_from_sequential(seq: SequentialResult, n_needed: int, margin: float) -> Decision:
    if seq.decision == PASSED:
        return Decision(
            PASSED,
            None,
            f"non-inferior (anytime-valid): CS lower bound {seq.lower:.4f} > {-margin:g} "
            f"after {seq.n_used} of {seq.n_max} items",
        )
    if seq.decision == FAILED:
        return Decision(
            FAILED,
            "regression",
            f"regression beyond the margin (anytime-valid): CS upper bound "
            f"{seq.upper:.4f} < {-margin:g} after {seq.n_used} of {seq.n_max} items",
        )
    return Decision(
        NOT_RUN,
        "underpowered",
        f"underpowered: the confidence sequence did not settle within "
        f"{seq.n_used} items (need n ≥ {max(n_needed, seq.n_used + 1)} or a larger maximum)",
    )


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


__all__ = [
    "ConfidenceSequence",
    "Decision",
    "Flips",
    "PairedComparison",
    "SequentialResult",
    "bin_names",
    "bins_by_edges",
    "cluster_by_item",
    "combine",
    "compare_bins",
    "confidence_sequence",
    "decision_from_sequential",
    "mcnemar_exact",
    "mean_bounds",
    "paired_comparison",
    "planning_variance",
    "rejects",
    "required_n",
    "sequential_decision",
    "sequential_stop_times",
    "TOP1_ALPHA",
    "shown_above",
    "unpaired_se",
    "z_sum",
]


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
