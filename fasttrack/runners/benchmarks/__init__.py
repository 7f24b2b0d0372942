"""Benchmarks: where the optimisation works, measured honestly, and the manifest's claims judged.

One check instance per benchmark and scope point (hardware setup × the benchmark's ``points``).
The package: `runner` (the runner, `run`), `timing` (prompts, decode rate, alternation), `census` (kernel
census of both sides), `rule` (the where-it-works rule and matrix), `claims` (claims outcomes).

Decode speed: stock (baseline) and candidate runs alternate in counterbalanced pairs (AB BA AB
...), so drift of the machine (thermal, other load) hits both sides alike and favours neither,
after one untimed warm-up per side. One run sends ``batch`` requests of ``input_tokens`` prompt
tokens together and times them twice: generating ``output_tokens`` tokens and generating 1; decode
tokens/s per user = (output_tokens - 1) / (t_full - t_first), so prefill is excluded by difference
(stated, never hidden). The speed-up is the median of the per-pair ratios (candidate/baseline for
higher-is-better metrics); its bounds are distribution-free (`speed`: exact sign test at a fixed
n, an anytime-valid sign test when timing sequentially), one-sided at the benchmark's ``alpha``.

The rule (`rule`): at a point an ``expect`` promise covers, the speed-up must reach the promise
(failed when the upper bound is below it, passed when the lower bound clears it, otherwise more
pairs up to ``max_pairs`` and then not_run(underpowered) with the pairs it would need); elsewhere
the candidate must not be slower than stock (failed when the upper bound is below 1).

The kernel census (kernel count and time per decode step and per layer, `fasttrack.kernel_census`)
is recorded for in-process torch targets. Each claim of the benchmark whose conditions match the
point becomes a ``claims`` outcome (not required): reproduced / not reproduced / not measurable /
not comparable, with labels from `fasttrack.claims`.
"""

from fasttrack.runners.benchmarks.census import CENSUS_REPEATS, CENSUS_STEPS, harmonise_census, kernel_census
from fasttrack.runners.benchmarks.claims import claim_outcomes
from fasttrack.runners.benchmarks.rule import (
    SLOWDOWN_TOLERANCE,
    Comparison,
    SpeedDecision,
    not_slower,
    paired_ratio,
    promise_at,
    promised,
    where_it_works,
    where_it_works_matrix,
)
from fasttrack.runners.benchmarks.runner import CENSUS_METRICS, MIN_PAIRS, RATE_METRICS, run
from fasttrack.runners.benchmarks.timing import alternate, decode_rate, synthetic_prompts

__all__ = [
    "CENSUS_METRICS",
    "CENSUS_REPEATS",
    "CENSUS_STEPS",
    "MIN_PAIRS",
    "RATE_METRICS",
    "SLOWDOWN_TOLERANCE",
    "Comparison",
    "SpeedDecision",
    "alternate",
    "claim_outcomes",
    "decode_rate",
    "harmonise_census",
    "kernel_census",
    "not_slower",
    "paired_ratio",
    "promise_at",
    "promised",
    "run",
    "synthetic_prompts",
    "where_it_works",
    "where_it_works_matrix",
]
