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
from fasttrack.kinds.benchmarks.census import CensusProof, judge_census, proof_fields
from fasttrack.kinds.benchmarks.decide import paired_ratio, within_margin
from fasttrack.kinds.benchmarks.run import SpeedSpec
from fasttrack.kinds.benchmarks.server_census import Census, census_at
from fasttrack.kinds.benchmarks.vllm_pairs import (
    PairedRuns,
    off_the_timed_cpus,
    pair_timer,
    read_run,
    runner_for,
    time_concurrency,
)
from fasttrack.kinds.claims.lint import DETECTED_KEY
from fasttrack.kinds.context import target_failure
from fasttrack.manifest.sections import lower_is_better
from fasttrack.manifest.vllm_bench import normalised_arg
from fasttrack.manifest.vllm_serve import bench_words, console_runnable

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.manifest import Manifest
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
    if not any(normalised_arg(k) == "num-warmups" for k in workload.get("args") or {}):
        # one wave of requests right before the timed ones: a server that sat idle while the other
        # side ran starts cold (measured: at concurrency 8 without it, ~2x slower; vllm_pairs.py)
        command += ["--num-warmups", str(concurrency)]
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


def tokenizer_args(
    context: RunContext, workload: Mapping[str, Any], point: Mapping[str, Any] | None = None
) -> list[str]:
    """A vllm target's checkpoint folder as the benchmark's tokenizer: the served name is no model
    id to download (and a gate run is offline); ``model: "{model}"``: the point's checkpoint."""
    vllm = context.manifest.target.vllm
    if vllm is None or "tokenizer" in (workload.get("args") or {}):
        return []
    checkpoint = str((point or {}).get("model", vllm.model)) if vllm.model == "{model}" else vllm.model
    local = context.manifest.resolve_path(checkpoint)
    return ["--tokenizer", str(local if local.exists() else checkpoint)]


def prompts_at(workload: Mapping[str, Any], concurrency: int) -> int:
    """``num_prompts`` for one concurrency: one value for all, or a list beside ``max_concurrency``."""
    value = workload["num_prompts"]
    if isinstance(value, list):
        return int(value[concurrencies(workload).index(concurrency)])
    return int(value)


@dataclass(frozen=True)
class _Side:
    url: str
    folder: Path


def judge(
    metric: str,
    runs: PairedRuns,
    assertions: Mapping[str, Mapping[str, float]],
    spec: SpeedSpec,
) -> tuple[Status, str | None, str | None, dict[str, Any]]:
    """One concurrency's verdict: completeness of every run, the candidate's absolute bounds,
    then the sequential rule of every benchmark point (not slower than stock by more than the
    margin) on the pair ratios of ``metric``."""
    baseline, candidate = runs.baseline, runs.candidate
    if runs.skipped is not None:
        return Status.NOT_RUN, "path_not_exercised", f"not timed: {runs.skipped} (the census outcome says why)", {}
    measurements: dict[str, Any] = {
        "baseline": {"median": median_fields(baseline), "runs": [dict(r.values) for r in baseline]},
        "candidate": {"median": median_fields(candidate), "runs": [dict(r.values) for r in candidate]},
    }
    bad_base = [f"run {i}: {p}" for i, r in enumerate(baseline, 1) for p in r.problems]
    bad_cand = [f"run {i}: {p}" for i, r in enumerate(candidate, 1) for p in r.problems]
    if bad_cand:
        return Status.FAILED, "crashed", "the candidate's benchmark is incomplete: " + "; ".join(bad_cand), measurements
    if bad_base:
        return Status.ERRORED, "target", "the baseline's benchmark is incomplete: " + "; ".join(bad_base), measurements
    unusable = runs.unusable(metric)
    if unusable or runs.seq is None:
        return (
            Status.ERRORED,
            "error",
            f"vllm bench serve gave no usable {metric!r} ({'; '.join(unusable[:4]) or 'no runs'}): a missing field "
            "needs --percentile-metrics / --metric-percentiles in args; a zero one means the stream delivered "
            "the output in one piece (no time per token to compare)",
            measurements,
        )
    violations = bound_violations(candidate, assertions)
    measurements["assertions"] = {"bounds": {k: dict(v) for k, v in assertions.items()}, "violations": violations}
    higher = not lower_is_better(metric)
    comparison = paired_ratio([r.values[metric] for r in baseline], [r.values[metric] for r in candidate], higher)
    seq = runs.seq
    measurements.update(
        ratio=comparison.ratio,
        ratio_ci=[b if math.isfinite(b) else None for b in (seq.lower, seq.upper)],
        pair_ratios=list(comparison.ratios),
        pairs=len(comparison.ratios),
        max_pairs=spec.max_pairs,
    )
    if violations:
        return (
            Status.FAILED,
            "regression",
            "outside the benchmark's absolute bounds: " + "; ".join(violations),
            measurements,
        )
    decision = within_margin(seq, spec.margin, spec.alpha, spec.max_pairs, runs.stopped)
    measurements.update(decision.measurements(spec.alpha, spec.family_points))
    return decision.status, decision.reason_code, decision.reason, measurements


def run(instance: CheckInstance, context: RunContext) -> list[CheckOutcome]:
    started, clock = utc_now(), time.monotonic()
    bench = dict(instance.config or {})
    workload = dict(bench.get("workload") or {})
    point = instance.scope_point.as_dict() if instance.scope_point is not None else {}
    metric = str(bench.get("metric"))
    values = concurrencies(workload)
    # every concurrency is a point of the family of timing decisions (decide.py)
    spec = SpeedSpec.of(context.manifest, instance.name, int(bench.get("family_points", 1)) * len(values))
    assertions = {k: dict(v) for k, v in (bench.get("assertions") or {}).items()}
    m = context.manifest
    model = (m.target.openai.model_name if m.target.openai else None) or m.model.id
    base: dict[str, Any] = {"metric": metric, "point": point, "workload": workload, "tool": "vllm bench serve"}

    if bench.get(DETECTED_KEY):  # the engine's flags forced speculative acceptance on these runs
        base.update(labels=["synthetic_acceptance"], synthetic_acceptance=list(bench[DETECTED_KEY]))

    def outcome_id(c: int) -> str:
        return instance.id if len(values) == 1 else f"{instance.id}#concurrency={c}"

    def outcomes(status: Status, reason_code: str, reason: str) -> list[CheckOutcome]:
        return [
            context.outcome(
                instance,
                status,
                id=outcome_id(c),
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
    results = []
    try:
        found, census = _time_every_concurrency(context, instance, point, workload, model, metric, spec, program)
    except TargetError as err:
        failed, failure_code = target_failure(err)
        return outcomes(failed, reason_code=failure_code, reason=str(err))
    for c in values:
        status, code, reason, measured = judge(metric, found[c], assertions, spec)
        measured = {**base, "max_concurrency": c, "num_prompts": prompts_at(workload, c), **measured}
        sides_census, proof = census[c]
        if sides_census["baseline"] is not None:
            measured["kernel_census"] = sides_census
        results.append(
            context.outcome(
                instance,
                status,
                id=outcome_id(c),
                started_at=started,
                duration_s=(time.monotonic() - clock) / len(values),
                reason_code=code,
                reason=reason,
                measurements=measured,
            )
        )
        if proof is not None:  # the switch's census proof at this concurrency (the point's batch)
            fields = proof_fields(context.manifest, proof, {**point, "batch": c})
            results.append(context.outcome(instance, proof.status, id=f"{outcome_id(c)}#census", **fields))
    return results


def side_cpus(manifest: Manifest, side: str) -> tuple[int, ...]:
    """The CPUs a side's server is pinned to (``cpus``; none for a target without servers)."""
    openai = manifest.target.openai
    return tuple(getattr(openai, side).cpus) if openai is not None else ()


def _census_every(
    context: RunContext, opened: list[Any], point: Mapping[str, Any], workload: Mapping[str, Any]
) -> dict[int, tuple[Census, CensusProof | None]]:
    """Both sides' census at every concurrency of the workload, each judged by the switch's proof."""
    census: dict[int, tuple[Census, CensusProof | None]] = {}
    for concurrency in concurrencies(workload):
        sides_census, counted = census_at(context.manifest, dict(zip(("baseline", "candidate"), opened)), concurrency)
        census[concurrency] = (
            sides_census,
            judge_census(context.manifest, sides_census, {**point, "batch": concurrency}, counted),
        )
    return census


def _time_every_concurrency(
    context: RunContext,
    instance: CheckInstance,
    point: Mapping[str, Any],
    workload: Mapping[str, Any],
    model: str,
    metric: str,
    spec: SpeedSpec,
    program: Sequence[str],
) -> tuple[dict[int, PairedRuns], dict[int, tuple[Census, CensusProof | None]]]:
    """Both sides' servers (the run's shared ones), then each concurrency timed in pairs, and the
    kernel census of both sides there where the servers run vLLM's profiler (`server_census`)."""
    from fasttrack.targets.sides import open_side

    run_bench = runner_for(context, program)
    sides: dict[str, _Side] = {}
    opened = []
    try:
        for side in ("baseline", "candidate"):
            handle = open_side(context.manifest, side, point, log_dir=context.artifact_dir)
            opened.append(handle)
            folder = context.artifact_path(f"vllm-bench-{side}")
            folder.mkdir(parents=True, exist_ok=True)
            sides[side] = _Side(str(handle.url), folder)
        found: dict[int, PairedRuns] = {}
        # Every concurrency's census first, then the timing: where the census shows that the
        # optimised path did not run, timing would time stock against stock, so that point is left
        # untimed (not_run) and the census fails. Profiling (a trace written by each server) then
        # never falls between one concurrency's timed pairs and the next's: every timed pair
        # meets the servers in the same state.
        census = _census_every(context, opened, point, workload)
        for concurrency in concurrencies(workload):
            num_prompts = prompts_at(workload, concurrency)

            def run_side(
                side: str, index: int, concurrency: int = concurrency, num_prompts: int = num_prompts
            ) -> Repetition:
                name = f"c{concurrency}-{'warmup' if index < 0 else f'p{index + 1}'}.json"
                seed = 1000 + index if index >= 0 else 999  # both sides of a pair get the same prompts
                at = sides[side]
                args = bench_command(
                    {**workload, "num_prompts": num_prompts},
                    at.url,
                    model,
                    concurrency,
                    at.folder,
                    name,
                    seed,
                    program=(),
                )
                with off_the_timed_cpus(side_cpus(context.manifest, side)):
                    code, tail = run_bench(
                        args + tokenizer_args(context, workload, point), f"vllm-bench-{side}-{name}.log"
                    )
                data = read_run(at.folder / name, code, tail, f"{side}, concurrency {concurrency}, {name}")
                return read_result(data, num_prompts)

            proof = census[concurrency][1]
            if proof is not None and proof.status is Status.FAILED:
                found[concurrency] = PairedRuns(
                    [], [], skipped="the kernel census shows the optimised path did not run here"
                )
                continue
            found[concurrency] = time_concurrency(
                pair_timer(run_side, str(workload.get("order", "alternating"))),
                metric,
                not lower_is_better(metric),
                1.0 - spec.margin,
                spec.alpha,
                int(workload.get("repetitions", 1)),
                spec.max_pairs,
                context.remaining_s,
            )
    finally:
        for handle in opened:
            handle.close()
    return found, census
