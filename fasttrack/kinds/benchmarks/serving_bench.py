"""An engine's own serving benchmark client run in pairs against both sides' servers: the part
``vllm_bench`` (``vllm bench serve``) and ``sglang_bench`` (``python -m sglang.bench_serving``)
share. A `BenchTool` says how one tool is started here, its command line, and how its result file
is read; everything else is one procedure: both sides' servers (the run's shared ones), the
kernel census where the servers give one, each concurrency timed in pairs (`vllm_pairs`), every
run's completeness, the candidate's absolute bounds, and the sequential "not slower than stock"
rule on the benchmark's ``metric``, a numeric field of the tool's result.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
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
    BenchRunner,
    PairedRuns,
    off_the_timed_cpus,
    pair_timer,
    read_run,
    time_concurrency,
)
from fasttrack.kinds.claims.lint import DETECTED_KEY
from fasttrack.kinds.context import target_failure
from fasttrack.manifest.sections import lower_is_better

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.manifest import Manifest
    from fasttrack.plan.instance import CheckInstance


@dataclass(frozen=True)
class BenchTool:
    """One engine's benchmark client, as fasttrack runs it."""

    kind: str  # the workload kind: "vllm_bench"
    name: str  # as its users call it: "vllm bench serve"
    artifact: str  # the prefix of its result folders and logs: "vllm-bench"
    program: Callable[[Manifest], Sequence[str] | None]  # how it starts here (None: it cannot)
    missing: str  # the not_run(dependency) reason where it cannot
    # (workload, url, model, concurrency, result folder, result file name, seed) -> its arguments
    args: Callable[[Mapping[str, Any], str, str, int, Path, str, int], list[str]]
    load: Callable[[Path], Mapping[str, Any]]  # a run's result file -> its fields
    tokenizer: Callable[[RunContext, Mapping[str, Any], Mapping[str, Any]], list[str]]
    runner: Callable[[RunContext, Sequence[str]], BenchRunner]
    missing_metric: str  # what a run without the metric's field needs
    result_suffix: str = "json"  # its result file's: "json" | "jsonl"


def concurrencies(workload: Mapping[str, Any]) -> list[int]:
    value = workload.get("max_concurrency", 1)
    return [int(v) for v in value] if isinstance(value, list) else [int(value)]


def prompts_at(workload: Mapping[str, Any], concurrency: int) -> int:
    """``num_prompts`` for one concurrency: one value for all, or a list beside ``max_concurrency``."""
    value = workload["num_prompts"]
    if isinstance(value, list):
        return int(value[concurrencies(workload).index(concurrency)])
    return int(value)


# ------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class Repetition:
    """One benchmark run's result: its numbers, and what makes it unusable (empty: fine)."""

    values: Mapping[str, float]
    problems: tuple[str, ...]


def read_result(data: Mapping[str, Any], num_prompts: int) -> Repetition:
    """The numeric fields of a result (the tool's names) and its completeness problems."""
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


def judge(
    metric: str,
    runs: PairedRuns,
    assertions: Mapping[str, Mapping[str, float]],
    spec: SpeedSpec,
    tool: str = "vllm bench serve",
    missing_metric: str = "",
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
            f"{tool} gave no usable {metric!r} ({'; '.join(unusable[:4]) or 'no runs'}): {missing_metric}a zero "
            "one means the stream delivered the output in one piece (no time per token to compare)",
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


# ------------------------------------------------------------------------------ running


@dataclass(frozen=True)
class _Side:
    url: str
    folder: Path


def run(instance: CheckInstance, context: RunContext, tool: BenchTool) -> list[CheckOutcome]:
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
    base: dict[str, Any] = {"metric": metric, "point": point, "workload": workload, "tool": tool.name}

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

    program = tool.program(m)
    if program is None:
        return outcomes(Status.NOT_RUN, reason_code="dependency", reason=tool.missing)
    results = []
    try:
        found, census = _time_every_concurrency(context, tool, point, workload, model, metric, spec, program)
    except TargetError as err:
        failed, failure_code = target_failure(err)
        return outcomes(failed, reason_code=failure_code, reason=str(err))
    for c in values:
        status, code, reason, measured = judge(metric, found[c], assertions, spec, tool.name, tool.missing_metric)
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
    tool: BenchTool,
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

    # The client (vLLM's bench code imported in this process: ~10 CPU-s on the 2-core host) gets
    # ready beside the servers' census, which mostly waits on the servers.
    client = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-client")
    making = client.submit(tool.runner, context, program)
    client.shutdown(wait=False)
    sides: dict[str, _Side] = {}
    opened = []
    try:
        for side in ("baseline", "candidate"):
            handle = open_side(context.manifest, side, point, log_dir=context.artifact_dir)
            opened.append(handle)
            folder = context.artifact_path(f"{tool.artifact}-{side}")
            folder.mkdir(parents=True, exist_ok=True)
            sides[side] = _Side(str(handle.url), folder)
        found: dict[int, PairedRuns] = {}
        # Every concurrency's census first, then the timing: where the census shows that the
        # optimised path did not run, timing would time stock against stock, so that point is left
        # untimed (not_run) and the census fails. Profiling (a trace written by each server) then
        # never falls between one concurrency's timed pairs and the next's: every timed pair
        # meets the servers in the same state.
        census = _census_every(context, opened, point, workload)
        run_bench = making.result()
        for concurrency in concurrencies(workload):
            num_prompts = prompts_at(workload, concurrency)

            def run_side(
                side: str, index: int, concurrency: int = concurrency, num_prompts: int = num_prompts
            ) -> Repetition:
                name = f"c{concurrency}-{'warmup' if index < 0 else f'p{index + 1}'}.{tool.result_suffix}"
                seed = 1000 + index if index >= 0 else 999  # both sides of a pair get the same prompts
                at = sides[side]
                args = tool.args(
                    {**workload, "num_prompts": num_prompts}, at.url, model, concurrency, at.folder, name, seed
                )
                with off_the_timed_cpus(side_cpus(context.manifest, side)):
                    code, tail = run_bench(
                        args + tool.tokenizer(context, workload, point), f"{tool.artifact}-{side}-{name}.log"
                    )
                data = read_run(
                    at.folder / name, code, tail, f"{side}, concurrency {concurrency}, {name}", tool.name, tool.load
                )
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
