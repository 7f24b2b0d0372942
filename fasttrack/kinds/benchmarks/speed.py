"""Distribution-free statistics of a speed-up from alternating timed pairs.

Each pair i gives one ratio r_i (candidate/stock for a higher-is-better metric, stock/candidate
for a latency): pairs are exchangeable when the machine's state hits both sides of a pair alike,
which the counterbalanced order (`fasttrack.kinds.benchmarks.timing.alternate`) arranges. The
parameter is the median speed-up m: P(r_i > m) = 1/2. No assumption on the noise's shape (timing
noise is skewed and has outliers, so a t interval on a handful of pairs is not trustworthy):

- **Fixed n (the "not slower than stock" rule).** The exact sign-test bounds: the one-sided (1-α)
  upper bound of m is the order statistic r_(k) with the smallest k such that
  P(Binomial(n, 1/2) >= k) <= α (scipy.stats.binom); symmetric for the lower bound. With fewer
  than log2(1/α) pairs no order statistic qualifies and the bound is infinite (`min_pairs`).
- **Sequential (a promised speed-up X, ``expect``).** The indicator x_i = 1{r_i > X} has mean
  1/2 exactly when m = X. The betting confidence sequence of `fasttrack.stats` (testing by
  betting, Waudby-Smith & Ramdas 2024) tests "mean <= 1/2" (m <= X: the promise is not shown)
  and "mean >= 1/2" (m >= X) after every pair, each at α, valid at any data-dependent stopping
  time: the runner may look after every new pair and stop at the first verdict.

Power is the price of making no assumption: the sign test uses only which side of X each pair
falls, so it decides quickly when the pairs fall clearly on one side of the promise (the usual
case: a clean path well above its promise, a broken one well below) and keeps timing when the
true speed-up is close to the promise (`pairs_needed` says how many more pairs would decide).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as st

from fasttrack.stats import rejects

PASS, FAIL, OPEN = "passed", "failed", "open"


def min_pairs(alpha: float) -> int:
    """Fewest pairs at which the fixed-n sign test can show anything at one-sided level alpha."""
    return max(1, math.ceil(math.log2(1.0 / alpha)))


def sign_bounds(ratios: Sequence[float] | np.ndarray, alpha: float) -> tuple[float, float]:
    """Exact one-sided (1-alpha) lower and upper bounds of the median ratio (order statistics)."""
    r = np.sort(np.asarray(ratios, dtype=float))
    n = len(r)
    if n == 0:
        return -math.inf, math.inf
    # k: smallest count with P(Bin(n, 1/2) >= k) <= alpha; U = r_(k), L = r_(n+1-k) (1-based)
    tail = st.binom.sf(np.arange(n + 1) - 1, n, 0.5)  # tail[k] = P(Bin >= k)
    ks = [k for k in range(1, n + 1) if tail[k] <= alpha]
    if not ks:
        return -math.inf, math.inf
    k = ks[0]
    return float(r[n - k]), float(r[k - 1])


@dataclass(frozen=True)
class Sequential:
    """The sign confidence sequence against one promise X after the pairs seen so far."""

    decision: str  # passed (median > X shown) | failed (median < X shown) | open
    pairs: int
    decided_at: int | None  # the pair after which the decision was reached
    above: int  # pairs with a ratio above the promise
    lower: float  # anytime-valid one-sided (1-alpha) bounds of the median after the last pair
    upper: float


def sequential(ratios: Sequence[float] | np.ndarray, promise: float, alpha: float, bounds: bool = True) -> Sequential:
    """Where the anytime-valid sign test against ``promise`` stands after ``ratios`` (in order);
    ``bounds=False`` skips the confidence sequence's bounds (inf), which cost O(n^2)."""
    r = np.asarray(ratios, dtype=float)
    lower, upper = cs_bounds(r, alpha) if bounds else (-math.inf, math.inf)
    if len(r) == 0:
        return Sequential(OPEN, 0, None, 0, lower, upper)
    above, below = rejects((r > promise).astype(float), 0.5, alpha, lo=0.0, hi=1.0)
    first_pass = int(np.argmax(above)) + 1 if above.any() else None
    first_fail = int(np.argmax(below)) + 1 if below.any() else None
    decided = [(t, d) for t, d in ((first_pass, PASS), (first_fail, FAIL)) if t is not None]
    above_count = int((r > promise).sum())
    if not decided:
        return Sequential(OPEN, len(r), None, above_count, lower, upper)
    at, decision = min(decided)
    return Sequential(decision, len(r), at, above_count, lower, upper)


def cs_bounds(ratios: Sequence[float] | np.ndarray, alpha: float) -> tuple[float, float]:
    """Anytime-valid one-sided (1-alpha) bounds of the median after all ``ratios``: the values X
    that the sign test has not rejected (on either side) at any time so far. The indicators only
    change at observed ratios, so the candidates are the gaps between order statistics."""
    r = np.asarray(ratios, dtype=float)
    if len(r) == 0:
        return -math.inf, math.inf
    edges = np.unique(r)
    gaps = np.concatenate([[edges[0] - 1.0], (edges[:-1] + edges[1:]) / 2, [edges[-1] + 1.0]])
    tested = [rejects((r > x).astype(float), 0.5, alpha, lo=0.0, hi=1.0) for x in gaps]
    shown_above = [bool(above.any()) for above, _ in tested]
    shown_below = [bool(below.any()) for _, below in tested]
    # gap j lies between edges[j-1] and edges[j]. Every gap before the first one not shown below
    # the median is below it: the lower bound is that gap's left edge (ties: an edge itself).
    first_open = next((j for j, shown in enumerate(shown_above) if not shown), len(gaps))
    last_open = next((j for j in range(len(gaps) - 1, -1, -1) if not shown_below[j]), -1)
    lower = -math.inf if first_open == 0 else float(edges[first_open - 1])
    upper = math.inf if last_open == len(gaps) - 1 else float(edges[max(last_open, 0)])
    return lower, upper


def pairs_needed(above: int, pairs: int, alpha: float) -> int | None:
    """About how many pairs in all the sequential test needs when ``above`` of ``pairs`` pairs fall
    above the promise (the betting capital grows like n * KL(share || 1/2); the aGRAPA bets reach
    about 70 % of that rate). None when the share is 1/2: the promise is the median, no n decides."""
    if pairs <= 0:
        return None
    share = min(max((above + 0.5) / (pairs + 1.0), 1e-3), 1 - 1e-3)
    kl = share * math.log(2 * share) + (1 - share) * math.log(2 * (1 - share))
    if kl < 1e-4:
        return None
    return max(pairs + 1, math.ceil(math.log(1.0 / alpha) / (0.7 * kl)))
