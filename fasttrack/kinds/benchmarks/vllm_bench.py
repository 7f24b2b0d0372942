"""A ``vllm_bench`` workload: vLLM's own ``vllm bench serve`` against each side's server, its
result JSON parsed, repetitions reduced to their median, absolute bounds checked on every raw
repetition, and the two sides compared pair by pair.

The workload, as vllm-project/perf-eval's ``vllm_bench.configs`` entries spell it::

    workload:
      kind: vllm_bench
      backend: openai            # vllm bench serve --backend (default openai)
      dataset: random            # --dataset-name (default random: --random-input-len/--random-output-len)
      input_len: 1024
      output_len: 1024
      num_prompts: 64
      max_concurrency: [1, 4, 16]    # an int or a list: one run (and one outcome) per value
      repetitions: 3                 # odd; the median of every numeric field is what is compared
      args: {num_warmups: 8, temperature: 0}   # more `vllm bench serve` options (not the ones fasttrack sets)
    assertions:                      # perf-eval PR #80: absolute bounds, on every raw repetition
      median_tpot_ms: {max: 12.0}
      output_throughput: {min: 500}

One server at a time (the GPUs hold one deployment): the baseline's server runs every
concurrency's repetitions, then the candidate's. Each repetition must be complete (``completed ==
num_prompts``, no ``failed`` request, every number finite), or the outcome is failed (candidate)
or errored (baseline: the comparison is void). The benchmark's ``metric`` (a field of the result
JSON such as ``median_tpot_ms``, ``output_throughput``) is compared as repetition pairs (i-th of
the baseline against i-th of the candidate) with the benchmarks' "not slower than stock" rule;
``assertions`` bound the candidate's raw repetitions. Without ``vllm`` on PATH: not_run(dependency).
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.errors import TargetError
from fasttrack.evidence import CheckOutcome, Status, utc_now
from fasttrack.kinds.benchmarks.decide import SLOWDOWN_TOLERANCE, not_slower, paired_ratio
from fasttrack.kinds.claims.lint import DETECTED_KEY
from fasttrack.manifest.sections import DEFAULT_SPEED_ALPHA, lower_is_better
from fasttrack.manifest.vllm_bench import normalised_arg
from fasttrack.manifest.vllm_serve import bench_words, console_runnable

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.plan.instance import CheckInstance

KIND = "vllm_bench"
# Fields of the result JSON that count requests rather than measure them.
COUNT_FIELDS = ("completed", "failed", "num_prompts")


def concurrencies(workload: Mapping[str, Any]) -> list[int]:
    value = workload.get("max_concurrency", 1)
    return [int(v) for v in value] if isinstance(value, list) else [int(value)]


def extra_args(args: Mapping[str, Any] | None) -> list[str]:
    """perf-eval's encoding of ``args``: True -> the flag; False/None -> nothing; a list -> the flag
    per item; a mapping -> JSON; anything else -> the flag and its value."""
    words: list[str] = []
    for name, value in (args or {}).items():
        flag = f"--{normalised_arg(name)}"
        if value is True:
            words.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            for item in value:
                words += [flag, json.dumps(item) if isinstance(item, (dict, list)) else str(item)]
        else:
            words += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return words


def bench_command(
    workload: Mapping[str, Any],
    url: str,
    model: str,
    concurrency: int,
    result_dir: Path,
    name: str,
    seed: int,
    program: Sequence[str] = ("vllm", "bench", "serve"),
) -> list[str]:
    """The ``vllm bench serve`` command line of one repetition (``program``: how it is started
    here, `fasttrack.manifest.vllm_serve.bench_words`)."""
    dataset = str(workload.get("dataset", "random"))
    command = [
        *program,
        "--backend",
        str(workload.get("backend", "openai")),
        "--base-url",
        url,
        "--model",
        model,
        "--dataset-name",
        dataset,
        "--num-prompts",
        str(int(workload["num_prompts"])),
        "--max-concurrency",
        str(concurrency),
        "--seed",
        str(seed),
        "--save-result",
        "--result-dir",
        str(result_dir),
        "--result-filename",
        name,
        "--disable-tqdm",
    ]
    if str(workload.get("backend", "openai")) == "openai-chat":
        command += ["--endpoint", "/v1/chat/completions"]
    if dataset == "random":
        # every request runs to output_len: otherwise a random prompt may stop early and decode collapses
        command += ["--random-input-len", str(int(workload["input_len"]))]
        command += ["--random-output-len", str(int(workload["output_len"])), "--ignore-eos"]
    else:
        command += ["--input-len", str(int(workload["input_len"])), "--output-len", str(int(workload["output_len"]))]
    return command + extra_args(workload.get("args"))


def bench_program(manifest: Any) -> tuple[str, ...] | None:
    """How ``vllm bench serve`` starts here: ``vllm`` on PATH; for a vllm target, whose servers run
    on this interpreter, its choice (`fasttrack.manifest.vllm_serve.bench_words`). None: it cannot."""
    from importlib.util import find_spec

    if manifest.target.kind == "vllm" and (console_runnable() or find_spec("vllm") is not None):
        return bench_words()
    return ("vllm", "bench", "serve") if shutil.which("vllm") is not None else None


# ------------------------------------------------------------------------------ result JSON


@dataclass(frozen=True)
class Repetition:
    """One `vllm bench serve` result: its numbers, and what makes it unusable (empty: fine)."""

    values: Mapping[str, float]
    problems: tuple[str, ...]


def read_result(data: Mapping[str, Any], num_prompts: int) -> Repetition:
    """The numeric fields of a result JSON (vLLM's names) and its completeness problems."""
    values: dict[str, float] = {}
    problems: list[str] = []
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not math.isfinite(float(value)):
            problems.append(f"{key} is {value}")
            continue
        values[key] = float(value)
    completed = data.get("completed")
    if completed is None:
        problems.append("the result has no 'completed' count")
    elif int(completed) != num_prompts:
        problems.append(f"completed {completed} of {num_prompts} prompts")
    if int(data.get("failed") or 0):
        problems.append(f"{data['failed']} request(s) failed")
    errors = [e for e in data.get("errors") or () if e]
    if errors:
        problems.append(f"{len(errors)} request error(s), first: {str(errors[0])[:200]}")
    return Repetition(values, tuple(problems))


def median_fields(repetitions: Sequence[Repetition]) -> dict[str, float]:
    """The median of every numeric field over the repetitions (perf-eval's aggregate)."""
    keys = sorted({k for r in repetitions for k in r.values})
    return {k: float(statistics.median([r.values[k] for r in repetitions if k in r.values])) for k in keys}


def bound_violations(repetitions: Sequence[Repetition], assertions: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Every raw repetition against the absolute bounds ``{metric: {min, max}}``."""
    found = []
    for index, rep in enumerate(repetitions, start=1):
        for metric, bounds in assertions.items():
            value = rep.values.get(metric)
            if value is None:
                found.append(f"repetition {index} reports no {metric}")
                continue
            if bounds.get("min") is not None and value < float(bounds["min"]):
                found.append(f"{metric} {value:g} < min {bounds['min']:g} (repetition {index})")
            if bounds.get("max") is not None and value > float(bounds["max"]):
                found.append(f"{metric} {value:g} > max {bounds['max']:g} (repetition {index})")
    return found


# ------------------------------------------------------------------------------ running


def tokenizer_args(context: RunContext, workload: Mapping[str, Any]) -> list[str]:
    """A vllm target's checkpoint folder as the benchmark's tokenizer: the served name is no model
    id to download (and a gate run is offline)."""
    vllm = context.manifest.target.vllm
    if vllm is None or "tokenizer" in (workload.get("args") or {}):
        return []
    local = context.manifest.resolve_path(vllm.model)
    return ["--tokenizer", str(local if local.exists() else vllm.model)]


def run_side(
    context: RunContext,
    side: str,
    point: Mapping[str, Any],
    workload: Mapping[str, Any],
    model: str,
    program: Sequence[str] = ("vllm", "bench", "serve"),
) -> dict[int, list[Repetition]]:
    """Start one side's server, run every concurrency's repetitions, stop it."""
    from fasttrack.targets.sides import open_side

    repetitions = int(workload.get("repetitions", 1))
    num_prompts = int(workload["num_prompts"])
    folder = context.artifact_path(f"vllm-bench-{side}")
    folder.mkdir(parents=True, exist_ok=True)
    results: dict[int, list[Repetition]] = {}
    opened = open_side(context.manifest, side, point, log_dir=context.artifact_dir)  # type: ignore[arg-type]
    try:
        for concurrency in concurrencies(workload):
            for rep in range(1, repetitions + 1):
                name = f"c{concurrency}-r{rep}.json"
                command = bench_command(
                    workload, str(opened.url), model, concurrency, folder, name, seed=rep, program=program
                )
                command += tokenizer_args(context, workload)
                result = context.run_process(command, log_name=f"vllm-bench-{side}-{name}.log")
                if result.timed_out:
                    raise TargetError(f"vllm bench serve ({side}, concurrency {concurrency}) ran past the time limit")
                path = folder / name
                if result.returncode != 0 or not path.exists():
                    raise TargetError(
                        f"vllm bench serve ({side}, concurrency {concurrency}, repetition {rep}) exited "
                        f"{result.returncode} without a result: {result.tail(400)}"
                    )
                data = json.loads(path.read_text(encoding="utf-8"))
                results.setdefault(concurrency, []).append(read_result(data, num_prompts))
    finally:
        opened.close()
    return results


def judge(
    metric: str,
    baseline: Sequence[Repetition],
    candidate: Sequence[Repetition],
    assertions: Mapping[str, Mapping[str, float]],
    alpha: float,
) -> tuple[Status, str | None, str | None, dict[str, Any]]:
    """One concurrency's verdict: completeness of every repetition, the candidate's absolute
    bounds, then "not slower than stock" on the repetition pairs of ``metric``."""
    measurements: dict[str, Any] = {
        "baseline": {"median": median_fields(baseline), "runs": [dict(r.values) for r in baseline]},
        "candidate": {"median": median_fields(candidate), "runs": [dict(r.values) for r in candidate]},
    }
    bad_base = [f"repetition {i}: {p}" for i, r in enumerate(baseline, 1) for p in r.problems]
    bad_cand = [f"repetition {i}: {p}" for i, r in enumerate(candidate, 1) for p in r.problems]
    if bad_cand:
        return Status.FAILED, "crashed", "the candidate's benchmark is incomplete: " + "; ".join(bad_cand), measurements
    if bad_base:
        return Status.ERRORED, "target", "the baseline's benchmark is incomplete: " + "; ".join(bad_base), measurements
    missing = [
        s for s, reps in (("baseline", baseline), ("candidate", candidate)) if any(metric not in r.values for r in reps)
    ]
    if missing:
        return (
            Status.ERRORED,
            "error",
            f"vllm bench serve reported no {metric!r} for the {' and '.join(missing)} (set --percentile-metrics / "
            "--metric-percentiles in args for percentile fields)",
            measurements,
        )
    violations = bound_violations(candidate, assertions)
    measurements["assertions"] = {"bounds": {k: dict(v) for k, v in assertions.items()}, "violations": violations}
    comparison = paired_ratio(
        [r.values[metric] for r in baseline], [r.values[metric] for r in candidate], not lower_is_better(metric), alpha
    )
    measurements.update(
        ratio=comparison.ratio,
        ratio_ci=[b if math.isfinite(b) else None for b in comparison.ratio_ci] if comparison.ratio_ci else None,
        pair_ratios=list(comparison.ratios),
        pairs=len(comparison.ratios),
        slowdown_tolerance=SLOWDOWN_TOLERANCE,
    )
    if violations:
        return (
            Status.FAILED,
            "regression",
            "outside the benchmark's absolute bounds: " + "; ".join(violations),
            measurements,
        )
    decision = not_slower(comparison, alpha, SLOWDOWN_TOLERANCE)
    measurements.update(decision.measurements(alpha))
    return decision.status, decision.reason_code, decision.reason, measurements


def run(instance: CheckInstance, context: RunContext) -> list[CheckOutcome]:
    started, clock = utc_now(), time.monotonic()
    bench = dict(instance.config or {})
    workload = dict(bench.get("workload") or {})
    point = instance.scope_point.as_dict() if instance.scope_point is not None else {}
    metric = str(bench.get("metric"))
    alpha = float(bench.get("alpha", DEFAULT_SPEED_ALPHA))
    assertions = {k: dict(v) for k, v in (bench.get("assertions") or {}).items()}
    values = concurrencies(workload)
    m = context.manifest
    model = (m.target.openai.model_name if m.target.openai else None) or m.model.id
    base: dict[str, Any] = {"metric": metric, "point": point, "workload": workload, "tool": "vllm bench serve"}

    if bench.get(DETECTED_KEY):  # the engine's flags forced speculative acceptance on these runs
        base.update(labels=["synthetic_acceptance"], synthetic_acceptance=list(bench[DETECTED_KEY]))

    def outcomes(status: Status, reason_code: str, reason: str) -> list[CheckOutcome]:
        return [
            context.outcome(
                instance,
                status,
                id=instance.id if len(values) == 1 else f"{instance.id}#concurrency={c}",
                started_at=started,
                duration_s=time.monotonic() - clock,
                measurements={**base, "max_concurrency": c},
                reason_code=reason_code,
                reason=reason,
            )
            for c in values
        ]

    program = bench_program(m)
    if program is None:
        return outcomes(
            Status.NOT_RUN,
            reason_code="dependency",
            reason="`vllm bench serve` needs vLLM, which is not installed here",
        )
    try:
        baseline = run_side(context, "baseline", point, workload, model, program)
        candidate = run_side(context, "candidate", point, workload, model, program)
    except TargetError as err:
        return outcomes(Status.ERRORED, reason_code="target", reason=str(err))
    results = []
    for c in values:
        status, code, reason, measured = judge(metric, baseline.get(c, []), candidate.get(c, []), assertions, alpha)
        measured = {**base, "max_concurrency": c, "repetitions": int(workload.get("repetitions", 1)), **measured}
        results.append(
            context.outcome(
                instance,
                status,
                id=instance.id if len(values) == 1 else f"{instance.id}#concurrency={c}",
                started_at=started,
                duration_s=(time.monotonic() - clock) / len(values),
                reason_code=code,
                reason=reason,
                measurements=measured,
            )
        )
    return results
