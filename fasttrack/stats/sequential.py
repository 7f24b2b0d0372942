"""Anytime-valid confidence sequences (testing by betting) and the sequential rule of evals:
look after every batch, stop once the verdict is settled, at any stopping time valid."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from fasttrack.stats.paired import FAILED, NOT_RUN, PASSED, Decision

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


def _log_capital(x: np.ndarray, m: np.ndarray | float, side: int, block: int = 1) -> np.ndarray:
    """log K_t for x (S, T) in [0, 1] against null means m (broadcast to (S or G, 1)).

    side=+1 bets that the mean exceeds m (rejects "mean ≤ m"); side=-1 the opposite. With
    ``block`` = k > 1 the bet is fixed within each block of k items (from the items before it).
    """
    s, t_len = x.shape
    t = np.arange(1, t_len + 1, dtype=float)
    w = _PRIOR_WEIGHT
    mu = (0.5 * w + np.cumsum(x, axis=1)) / (t + w)
    var = (0.25 * w + np.cumsum((x - mu) ** 2, axis=1)) / (t + w)
    mu_prev = np.concatenate([np.full((s, 1), 0.5), mu[:, :-1]], axis=1)  # predictable: uses x_<t only
    var_prev = np.concatenate([np.full((s, 1), 0.25), var[:, :-1]], axis=1)
    if block > 1:  # every item of a block bets what its block's first item bet
        first = (np.arange(t_len) // block) * block
        mu_prev, var_prev = mu_prev[:, first], var_prev[:, first]
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
    d: np.ndarray, m: float, alpha: float, *, lo: float = -1.0, hi: float = 1.0, block: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Anytime-valid one-sided tests of the mean of d against m, after each item.

    Returns (above, below), boolean arrays shaped like d: ``above[..., t]`` is True once "mean ≤ m"
    has been rejected by item t (the mean is shown to exceed m), ``below`` once "mean ≥ m" has.

    ``block`` = k: d comes in cycles of k items, one from each of k strata (length bins, taken in
    turn), and m is about the strata's equal-weighted mean. Each item's mean is its stratum's,
    so the per-item capital is no supermartingale; the capital at cycle ends is: the bet is fixed
    within a cycle, and by AM-GM Π_j (1 + λ(μ_j − m)) ≤ (1 + λ(mean_j μ_j − m))^k ≤ 1 under the
    null (every factor is positive: λ < 1/m). So only cycle ends may reject.
    """
    d = np.asarray(d, dtype=float)
    x = _to_unit(np.atleast_2d(d), lo, hi)
    mu = (m - lo) / (hi - lo)
    thr = math.log(1.0 / alpha)
    above = _crossed(_log_capital(x, mu, +1, block), thr, block)
    below = _crossed(_log_capital(x, mu, -1, block), thr, block)
    if d.ndim == 1:
        return above[0], below[0]
    return above, below


def _crossed(log_capital: np.ndarray, thr: float, block: int) -> np.ndarray:
    """True from the first (cycle-end, with ``block``) time the capital reaches 1/alpha."""
    if block > 1:  # mid-cycle capital does not count: carry the last cycle end's value forward
        t_len = log_capital.shape[1]
        ends = np.arange(t_len) + 1
        last_end = (ends // block) * block - 1  # index of the last complete cycle's end (-1: none yet)
        padded = np.concatenate([np.full((log_capital.shape[0], 1), -np.inf), log_capital], axis=1)
        log_capital = padded[:, last_end + 1]
    return np.maximum.accumulate(log_capital, axis=1) >= thr


@dataclass(frozen=True)
class ConfidenceSequence:
    lower: np.ndarray  # anytime-valid one-sided (1-α) lower bound of mean(d) after each item
    upper: np.ndarray


def confidence_sequence(
    d: Sequence[float] | np.ndarray,
    alpha: float,
    *,
    lo: float = -1.0,
    hi: float = 1.0,
    step: float = 0.0025,
    block: int = 1,
) -> ConfidenceSequence:
    """The betting confidence sequence of one run, on a grid of null means (resolution ``step``).

    The bound after item t is the smallest (largest) grid value not yet rejected; monotone in t.
    ``block``: as in `rejects` (bounds move at cycle ends only).
    """
    values = np.asarray(d, dtype=float)
    x = _to_unit(values[None, :], lo, hi)
    grid = np.arange(0.0, 1.0 + step / (hi - lo), step / (hi - lo))
    grid = np.clip(grid, 1e-6, 1.0 - 1e-6)
    thr = math.log(1.0 / alpha)
    xs = np.broadcast_to(x, (len(grid), x.shape[1]))
    rej_low = _crossed(_log_capital(xs, grid, +1, block), thr, block)  # (G, T)
    rej_high = _crossed(_log_capital(xs, grid, -1, block), thr, block)
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
    block: int = 1,
) -> SequentialResult:
    """Look at the confidence sequence after each n in ``looks``: PASS once lower > -Δ, FAIL once
    upper < -Δ. If ``d`` ends before ``n_max`` is reached, the caller has more items to evaluate
    and the result is "continue" (decision ``inconclusive``, ``n_used`` = len(d)).

    At ``n_max`` without a verdict the result is ``inconclusive`` (→ not_run(underpowered)); it
    does NOT fall back to the fixed-n test, which after repeated looks would no longer hold its
    level. ``block``: ``d`` comes in cycles over strata (`rejects`).
    """
    values = np.asarray(d, dtype=float)
    n_max = n_max if n_max is not None else len(values)
    if len(values) == 0:
        return SequentialResult("inconclusive", 0, n_max, False, -1.0, 1.0, ())
    above, below = rejects(values, -margin, alpha, block=block)
    cs = confidence_sequence(values, alpha, block=block)
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
    d: np.ndarray, *, margin: float, alpha: float, looks: Sequence[int], block: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised sequential rule over simulations d (sims, T): (decision codes, n used).

    Codes: 1 pass, -1 fail, 0 inconclusive at the last look.
    """
    above, below = rejects(np.atleast_2d(d), -margin, alpha, block=block)
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


def items_to_settle(
    d: Sequence[float] | np.ndarray,
    *,
    margin: float,
    alpha: float,
    batch: int,
    power: float = 0.8,
    cap: int = 5000,
    sims: int = 200,
    seed: int = 0,
    block: int = 1,
) -> int | None:
    """Items the sequential rule above needs before it passes a candidate like the one observed:
    the smallest look by which a share ``power`` of simulated continuations pass. A continuation
    keeps the observed differences and draws the rest from them with replacement (no observation:
    identical outputs). None when fewer than that share pass within ``cap`` items.

    This is what an underpowered eval reports as "needs n": the fixed-n formula (``required_n``)
    plans for a variance the betting sequence does not pay for, e.g. 119 items where identical
    outputs settle at 71. ``block``: the items come in cycles over bins (`rejects`)."""
    observed = np.asarray(d, dtype=float)
    pool = observed if len(observed) else np.zeros(1)
    share = math.ceil(power * sims)
    for length in (min(cap, 512), cap):  # most evals settle within a few hundred: try short first
        length = max(length, len(observed) + batch)
        x = np.random.default_rng(seed).choice(pool, size=(sims, length))
        x[:, : len(observed)] = observed
        looks = range(batch, length + 1, batch)
        code, used = sequential_stop_times(x, margin=margin, alpha=alpha, looks=looks, block=block)
        settled = np.sort(used[code == 1])
        if len(settled) >= share:
            return int(settled[share - 1])
    return None
