"""The distribution tests of the temperature probe, with p-values that hold in the far tail.

The probe compares n sampled tokens with the baseline's softmax(logits/T) at several temperatures,
top-p values, prompts and positions, and Bonferroni-corrects over all of them: a clean candidate
fails when one p-value falls below alpha / (number of tests), about 1e-4. The large-sample
approximations are accurate in the bulk but not there (measured on the example model, 20,000
simulated clean draws of 400 samples each):

- Pearson's chi-square with every expected count >= 5 gave p < 2e-4 in 4.5e-4 to 5.5e-4 of clean
  draws (2.5x the nominal rate);
- the score test's normal approximation of a sum of log-probabilities, which are heavily skewed
  (a rare token's log p is far below the mean), gave |z| >= 3.72 (nominal two-sided p = 2e-4) in
  up to 9.7e-4 of clean draws (almost 5x).

Both are exact here instead: a Monte Carlo test (scipy.stats.monte_carlo_test) that draws the
statistic's null distribution from the very multinomial the samples should follow, p = (1 +
#{null >= observed}) / (1 + B), which is never below the true p in expectation (a valid p-value at
any sample size). The approximation is kept as a screen: only a test whose asymptotic p is below
`SCREEN` (1e-2, far above any Bonferroni threshold, far below the approximations' errors) is
refined, in two stages (`two_stage`): 4,999 resamples first, then B = `RESOLUTION` / threshold
(about 200,000) when the first stage cannot rule significance out, so that a true p at half the
threshold is still seen below it; tests above the screen cannot fail and keep the asymptotic p.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_EXPECTED = 5.0  # pooling rule: categories whose expected count is below this are pooled (for power)
SCREEN = 1e-2
RESOLUTION = 20.0
MAX_RESAMPLES = 400_000
BATCH = 4_000  # resamples per statistic call (memory: BATCH x samples labels)


@dataclass(frozen=True)
class PooledGroup:
    """Counts of one group of samples in pooled categories, and the null probability of each."""

    observed: np.ndarray  # counts per pooled category
    probs: np.ndarray  # null probabilities per pooled category (sum 1)

    @property
    def n(self) -> int:
        return int(self.observed.sum())

    @property
    def categories(self) -> int:
        return len(self.probs)


def pool(observed: Mapping[int, int], expected_probs: np.ndarray) -> PooledGroup | None:
    """Tokens sorted by expected count; those below MIN_EXPECTED are pooled into one category, and
    a pool still below it joins the smallest kept category. The pooling depends only on the null
    probabilities and the group's size, never on which tokens were drawn. None: fewer than two
    categories (everything on one token, as expected: nothing to test)."""
    n = sum(observed.values())
    expected = np.asarray(expected_probs, dtype=float) * n
    order = [int(t) for t in np.argsort(-expected, kind="stable")]
    kept = [t for t in order if expected[t] >= MIN_EXPECTED] or order[:1]
    kept_set = set(kept)
    obs = [float(observed.get(t, 0)) for t in kept]
    exp = [float(expected[t]) for t in kept]
    rest_obs = float(sum(c for t, c in observed.items() if t not in kept_set))
    rest_exp = float(n - sum(exp))
    if rest_exp >= MIN_EXPECTED or (len(kept) == 1 and (rest_exp > 0 or rest_obs > 0)):
        obs.append(rest_obs)
        exp.append(max(rest_exp, 0.0))
    elif rest_obs or rest_exp:
        obs[-1] += rest_obs
        exp[-1] += rest_exp
    if len(obs) < 2 or n == 0:
        return None
    probs = np.asarray(exp) / sum(exp)
    return PooledGroup(np.asarray(obs), probs)


def pearson(counts: np.ndarray, probs: np.ndarray, n: int) -> np.ndarray:
    """Pearson's X^2 along the last axis (a category the null gives no mass counts by its excess)."""
    expected = np.maximum(probs * n, 1e-12)
    return ((counts - probs * n) ** 2 / expected).sum(axis=-1)


def chi_square(groups: Sequence[PooledGroup]) -> tuple[float, float, int]:
    """(X^2 summed over independent groups, its asymptotic p, degrees of freedom)."""
    statistic = float(sum(pearson(g.observed, g.probs, g.n) for g in groups))
    df = sum(g.categories - 1 for g in groups)
    return statistic, float(stats.chi2.sf(statistic, df)), df


def resamples_for(threshold: float) -> int:
    return int(min(MAX_RESAMPLES, max(999, math.ceil(RESOLUTION / threshold))))


FIRST_STAGE = 4_999
FIRST_STAGE_EXCEEDANCES = 5


def two_stage(run: Callable[[int], float], threshold: float) -> tuple[float, int]:
    """A Monte Carlo p in two stages: a first run of `FIRST_STAGE` resamples; when at least
    `FIRST_STAGE_EXCEEDANCES` of them reach the observed statistic the test cannot be significant
    at ``threshold`` (its p is far above it) and that p is kept; otherwise a second, independent run
    of `resamples_for` (threshold) resamples gives the p. Only the second run can reject, so the
    test is as valid as one run, and a test with true p at half the threshold almost never stops
    early (5 exceedances in 4,999 when 0.25 are expected). (p, resamples of the run kept)."""
    p1 = run(FIRST_STAGE)
    if p1 * (FIRST_STAGE + 1) >= FIRST_STAGE_EXCEEDANCES + 1 or p1 >= 1.0:
        return p1, FIRST_STAGE
    b = resamples_for(threshold)
    return run(b), b


def _labels(groups: Sequence[PooledGroup]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The groups' samples as one row of category labels (offset per group), each column's group,
    and the group offsets."""
    offsets = np.cumsum([0] + [g.categories for g in groups[:-1]])
    data = np.concatenate(
        [np.repeat(np.arange(g.categories) + off, g.observed.astype(int)) for g, off in zip(groups, offsets)]
    )
    column_group = np.concatenate([np.full(g.n, i) for i, g in enumerate(groups)])
    return data, column_group, offsets


def chi_square_monte_carlo(
    groups: Sequence[PooledGroup], threshold: float, rng: np.random.Generator
) -> tuple[float, int]:
    """Monte Carlo p of the summed X^2 under the groups' null multinomials: (p, resamples)."""
    data, column_group, offsets = _labels(groups)
    total = sum(g.categories for g in groups)
    probs = np.concatenate([g.probs for g in groups])
    sizes = np.concatenate([np.full(g.categories, g.n) for g in groups])
    cdfs = [np.cumsum(g.probs) for g in groups]

    def rvs(size: tuple[int, ...]) -> np.ndarray:
        rows = size[0]
        out = np.empty((rows, len(column_group)), dtype=np.int64)
        start = 0
        for g, off, cdf in zip(groups, offsets, cdfs):
            u = rng.random((rows, g.n))
            out[:, start : start + g.n] = (
                np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), g.categories - 1) + off
            )
            start += g.n
        return out

    def statistic(x: np.ndarray, axis: int = -1) -> np.ndarray:
        single = np.ndim(x) == 1
        x = np.atleast_2d(np.moveaxis(x, axis, -1))
        rows = x.shape[0]
        flat = (x + total * np.arange(rows)[:, None]).ravel()
        counts = np.bincount(flat, minlength=rows * total).reshape(rows, total)
        expected = probs * sizes  # per (group, category): the group's n times its null probability
        values = ((counts - expected) ** 2 / np.maximum(expected, 1e-12)).sum(axis=-1)
        return values[0] if single else values

    def run(resamples: int) -> float:
        result = stats.monte_carlo_test(
            data, rvs, statistic, vectorized=True, n_resamples=resamples, batch=BATCH, alternative="greater"
        )
        return float(result.pvalue)

    return two_stage(run, threshold)


# ---------------------------------------------------------------------------------------------
# The score test: mean log-probability of first tokens


@dataclass(frozen=True)
class ScoreNull:
    """What the score test compares with: q (the sampling distribution) and log p (the baseline's)."""

    logp: np.ndarray  # baseline log-probabilities (finite; -1e9 for impossible tokens)
    q: np.ndarray  # softmax(logits / T) with the top-p cut

    @property
    def mean(self) -> float:
        return float((self.q * self.logp).sum())

    @property
    def var(self) -> float:
        return float((self.q * self.logp**2).sum() - self.mean**2)


def score_monte_carlo(
    null: ScoreNull, tokens: Sequence[int], threshold: float, rng: np.random.Generator
) -> tuple[float, int]:
    """Monte Carlo two-sided p of the sum of log p over ``tokens`` drawn from q: (p, resamples)."""
    support = np.flatnonzero(null.q > 0)
    cdf = np.cumsum(null.q[support])
    index = {int(t): i for i, t in enumerate(support)}
    # a token q cannot produce has no index: it is as extreme as anything (its log p is -1e9 below)
    values = np.append(null.logp[support], -1e9)
    data = np.asarray([index.get(int(t), len(support)) for t in tokens])

    def rvs(size: tuple[int, ...]) -> np.ndarray:
        u = rng.random(size)
        return np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), len(support) - 1)

    def statistic(x: np.ndarray, axis: int = -1) -> np.ndarray:
        return values[x].sum(axis=axis)

    def run(resamples: int) -> float:
        result = stats.monte_carlo_test(
            data, rvs, statistic, vectorized=True, n_resamples=resamples, batch=BATCH, alternative="two-sided"
        )
        return float(min(1.0, result.pvalue))

    return two_stage(run, threshold)
