"""Benchmarks: where the optimisation works, measured honestly, and the manifest's claims judged
(``benchmarks``).

The package: `run` (the runner), `timing` (prompts, decode rate, alternation), `census` (kernel
census of both sides), `decide` (the where-it-works rule and matrix), `speed` (sign-test bounds),
`claims` (claims outcomes), `serving_bench` (an engine's own benchmark client run in pairs) with
`vllm_bench` (vLLM's `vllm bench serve`) and `sglang_bench` (SGLang's `sglang.bench_serving`).

Decode speed: stock (baseline) and candidate runs alternate in counterbalanced pairs (AB BA AB
...), so drift of the machine (thermal, other load) hits both sides alike and favours neither,
after one untimed warm-up per side. One run sends ``batch`` requests of ``input_tokens`` prompt
tokens together and times them twice: generating ``output_tokens`` tokens and generating 1; decode
tokens/s per user = (output_tokens - 1) / (t_full - t_first), so prefill is excluded by difference
(stated, never hidden). The speed-up is the median of the per-pair ratios (candidate/baseline for
higher-is-better metrics); its bounds are distribution-free (`speed`: exact sign test at a fixed
n, an anytime-valid sign test when timing sequentially), one-sided at the benchmark's ``alpha``.

The rule (`decide`): at a point an ``expect`` promise covers, the speed-up must reach the promise
(failed when the upper bound is below it, passed when the lower bound clears it, otherwise more
pairs up to ``max_pairs`` and then not_run(underpowered) with the pairs it would need); elsewhere
the candidate must not be slower than stock (failed when the upper bound is below 1).

The kernel census (kernel count and time per decode step and per layer) is recorded for targets
that give one. Each claim of the benchmark whose conditions match the point becomes a ``claims``
outcome (not required): reproduced / not reproduced / not measurable / not comparable, with labels
from `fasttrack.kinds.claims.lint`.
"""

from fasttrack.kinds.base import Execution, KindSpec
from fasttrack.kinds.benchmarks import plan, report, rule
from fasttrack.kinds.benchmarks.measurements import BenchmarkMeasurements

KIND = KindSpec(
    name="benchmarks",
    letter="B",
    section="benchmarks",
    execution=Execution("subprocess", drives_target=True, timed=True),
    runner="fasttrack.kinds.benchmarks.run",
    plan=plan.plan,
    check=rule.check,
    measurements=BenchmarkMeasurements,
    exercises="end_to_end",
    report=report.SECTION,
    aliases=("benchmark", "bench"),
)
