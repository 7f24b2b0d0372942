"""The temperature probe where the baseline gives no full next-token distributions (a server):
both sides sample, and each position's two samples are compared (chi-square, made exact by a
permutation test where it would decide), with what an ignored temperature would look like for
the probe's power."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import stats

from fasttrack.probes.sampling_stats import MIN_EXPECTED, two_stage

Refiner = Callable[[float], tuple[float, int]]


def rng_of(*label: float) -> np.random.Generator:
    """A Monte Carlo stream fixed by the test's label: a rerun reproduces its p-value exactly."""
    return np.random.default_rng([int(round(v * 1000)) & 0xFFFFFFFF for v in label])


def two_sample_tests(
    reference: Sequence[tuple[int, ...]],
    samples: Sequence[tuple[int, ...]],
    positions: int,
    seed: int,
    temperature: float,
) -> list[tuple[dict[str, Any], Refiner | None]]:
    results: list[tuple[dict[str, Any], Refiner | None]] = []
    for position in range(positions):
        a = Counter(t[position] for t in reference if len(t) > position)
        b = Counter(t[position] for t in samples if len(t) > position)
        entry: dict[str, Any] = {
            "test": "two_sample_chi_square",
            "position": position,
            "groups": 1,
            "n": sum(b.values()),
            "outside_nucleus": 0,
        }
        table = _pooled_table(a, b)
        refine: Refiner | None = None
        if table is not None:
            result = stats.chi2_contingency(table)
            entry["p_value"] = float(result.pvalue)
            entry["statistic"] = float(result.statistic)
            entry["p_method"] = "asymptotic chi-square"
            if position == 0 and abs(temperature - 1.0) > 1e-6:
                entry.update(_ignored_alternative(a, temperature, sum(a.values()), sum(b.values())))
            label = (seed, temperature, position, 7)
            refine = lambda threshold, t=table, lab=label: permutation_p(t, threshold, rng_of(*lab))  # noqa: E731
        results.append((entry, refine))
    return results


def permutation_p(table: np.ndarray, threshold: float, rng: np.random.Generator) -> tuple[float, int]:
    """Exact-in-expectation p of the 2 x k table's X^2 by permuting the side labels: the pooling
    depends only on the column totals, which no permutation changes (a valid conditional test)."""
    k = table.shape[1]
    labels = [np.repeat(np.arange(k), table[row].astype(int)) for row in (0, 1)]

    def statistic(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        single = np.ndim(x) == 1
        x, y = np.atleast_2d(np.moveaxis(x, axis, -1)), np.atleast_2d(np.moveaxis(y, axis, -1))
        rows = x.shape[0]
        counts = [
            np.bincount((v + k * np.arange(rows)[:, None]).ravel(), minlength=rows * k).reshape(rows, k) for v in (x, y)
        ]
        both = counts[0] + counts[1]
        n = (x.shape[1], y.shape[1])
        total = n[0] + n[1]
        out = np.zeros(rows)
        for side, c in enumerate(counts):
            expected = both * n[side] / total
            out += ((c - expected) ** 2 / np.maximum(expected, 1e-12)).sum(axis=-1)
        return out[0] if single else out

    def run(resamples: int) -> float:
        result = stats.permutation_test(
            labels,
            statistic,
            permutation_type="independent",
            vectorized=True,
            n_resamples=resamples,
            alternative="greater",
            batch=2000,
            rng=rng,
        )
        return float(result.pvalue)

    return two_stage(run, threshold)


def _ignored_alternative(counts: Counter, temperature: float, n_ref: int, n_cand: int) -> dict[str, Any]:
    """Noncentrality of the two-sample chi-square if the candidate sampled at T = 1 instead of T.

    The baseline's own samples estimate q = softmax(logits/T); sampling at 1 instead gives
    p ∝ q^T. Rare tokens (fewer than 5 samples) are pooled and treated as equally likely.
    """
    total = sum(counts.values())
    kept = {t: c / total for t, c in counts.items() if c >= MIN_EXPECTED}
    rare = [c for c in counts.values() if c < MIN_EXPECTED]
    q = list(kept.values())
    alt = [v**temperature for v in q]
    if rare:
        mass = sum(rare) / total
        q.append(mass)
        alt.append(len(rare) * (mass / len(rare)) ** temperature)
    q_arr, alt_arr = np.asarray(q), np.asarray(alt) / sum(alt)
    n_eff = n_ref * n_cand / (n_ref + n_cand)
    mix = (q_arr + alt_arr) / 2
    return {
        "ignored_noncentrality": float(n_eff * ((alt_arr - q_arr) ** 2 / mix).sum()),
        "ignored_df": max(1, len(q) - 1),
    }


def _pooled_table(a: Counter, b: Counter) -> np.ndarray | None:
    """A 2 × k contingency table with rare tokens pooled (expected count ≥ 5 under homogeneity)."""
    total_a, total_b = sum(a.values()), sum(b.values())
    if not total_a or not total_b:
        return None
    share = min(total_a, total_b) / (total_a + total_b)
    tokens = sorted(set(a) | set(b), key=lambda t: -(a[t] + b[t]))
    kept = [t for t in tokens if (a[t] + b[t]) * share >= MIN_EXPECTED]
    rest = [t for t in tokens if t not in set(kept)]
    rows = [[a[t] for t in kept], [b[t] for t in kept]]
    rest_a, rest_b = sum(a[t] for t in rest), sum(b[t] for t in rest)
    if (rest_a + rest_b) * share >= MIN_EXPECTED or (kept and len(kept) == 1 and rest_a + rest_b):
        rows[0].append(rest_a)
        rows[1].append(rest_b)
    elif kept:
        rows[0][-1] += rest_a
        rows[1][-1] += rest_b
    return np.asarray(rows) if len(rows[0]) >= 2 else None
