"""Exact tests simple enough to need no statistics library, so that the runner that decides with
them and `fasttrack verify`, which re-derives the decision on a bare CI runner, use the same one:
the one-sided binomial test of a share (top-1 disagreements against a declared maximum)."""

from __future__ import annotations

import math

TOP1_ALPHA = 0.001  # per check (divergence, full-context, token coverage), split over its buckets


def binomial_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p): the exact upper tail (summed in log space)."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    log_p, log_q, log_n = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    terms = [log_n - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q for i in range(k, n + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * math.fsum(math.exp(t - top) for t in terms))


def shown_above(events: int, n: int, max_share: float, alpha: float) -> tuple[bool, float]:
    """Whether ``events`` of ``n`` (e.g. top-1 disagreements) show the true share above
    ``max_share`` at one-sided level ``alpha`` (exact binomial test), and its p-value.

    A point estimate against the maximum fails a clean candidate by chance: a path that flips 1 %
    of near-tied top-1 tokens (bf16 rounding) meets "top-1 agreement >= 0.98", yet a bucket of 64
    positions shows 2 or more flips (agreement < 0.98) 13.5 % of the time."""
    if n <= 0:
        return False, 1.0
    if max_share <= 0:
        return events > 0, 0.0 if events > 0 else 1.0
    p = binomial_sf(int(events), int(n), float(max_share))
    return p < alpha, p
