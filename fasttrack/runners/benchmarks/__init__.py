"""Benchmarks: where the optimisation works, measured honestly, and the manifest's claims judged.

One check instance per benchmark and scope point (hardware setup × the benchmark's ``points``).
The package: `runner` (the runner, `run`), `timing` (prompts, decode rate, alternation), `census` (kernel
census of both sides), `rule` (the where-it-works rule and matrix), `claims` (claims outcomes).

Decode speed: stock (baseline) and candidate runs ALTERNATE (A B A B ...), so drift of the machine
(thermal, other load) hits both sides alike; at least `MIN_PAIRS` pairs are run whatever the
manifest's ``repeats``, after one untimed warm-up per side. One run sends ``batch`` requests of
``input_tokens`` prompt tokens together and times them twice: generating ``output_tokens`` tokens
and generating 1; decode tokens/s per user = (output_tokens - 1) / (t_full - t_first), so prefill
is excluded by difference (stated, never hidden). The speed-up is the median of the per-pair
ratios (candidate/baseline for higher-is-better metrics), with a 95 % percentile-bootstrap CI of
that median (scipy.stats.bootstrap).

Where-it-works rule (this point is inside the declared scope, so the candidate must not be slower):
- **failed** (``regression``) when the ratio's CI upper bound is below 1: slower than stock, shown;
- **not_run** (``underpowered``) when the median is below 1 - `SLOWDOWN_TOLERANCE` but the CI still
  reaches 1: possibly slower, too noisy to tell; more repeats needed;
- **passed** otherwise (ratio recorded for the where-it-works matrix).

The kernel census (kernel count and time per decode step and per layer, `fasttrack.kernel_census`)
is recorded for in-process torch targets. Each claim of the benchmark whose conditions match the
point becomes a ``claims`` outcome (not required): reproduced / not reproduced / not measurable /
not comparable, with labels from `fasttrack.claims`.
"""

from fasttrack.runners.benchmarks.census import CENSUS_REPEATS, CENSUS_STEPS, harmonise_census, kernel_census
from fasttrack.runners.benchmarks.claims import claim_outcomes
from fasttrack.runners.benchmarks.rule import (
    CONFIDENCE,
    SLOWDOWN_TOLERANCE,
    Comparison,
    paired_ratio,
    where_it_works,
    where_it_works_matrix,
)
from fasttrack.runners.benchmarks.runner import CENSUS_METRICS, MIN_PAIRS, RATE_METRICS, run
from fasttrack.runners.benchmarks.timing import alternate, decode_rate, synthetic_prompts

__all__ = [
    "CENSUS_METRICS",
    "CENSUS_REPEATS",
    "CENSUS_STEPS",
    "CONFIDENCE",
    "MIN_PAIRS",
    "RATE_METRICS",
    "SLOWDOWN_TOLERANCE",
    "Comparison",
    "alternate",
    "claim_outcomes",
    "decode_rate",
    "harmonise_census",
    "kernel_census",
    "paired_ratio",
    "run",
    "synthetic_prompts",
    "where_it_works",
    "where_it_works_matrix",
]
