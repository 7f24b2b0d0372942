"""The benchmark runner: one scope point, both sides opened, timed in alternation, judged."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fasttrack.errors import TargetError
from fasttrack.evidence import ARM_SEPARATOR, CheckOutcome, Status, utc_now
from fasttrack.kinds.benchmarks.census import (
    CENSUS_REPEATS,
    harmonise_census,
    judge_census,
    kernel_census,
    proof_fields,
)
from fasttrack.kinds.benchmarks.claims import claim_outcomes
from fasttrack.kinds.benchmarks.decide import (
    Comparison,
    SpeedDecision,
    count_not_slower,
    pair_ratios,
    paired_ratio,
    promise_at,
    promised,
    within_margin,
)
from fasttrack.kinds.benchmarks.speed import OPEN, min_pairs, sequential
from fasttrack.kinds.benchmarks.timing import decode_rate, synthetic_prompts, timed_pair
from fasttrack.kinds.claims.lint import DETECTED_KEY
from fasttrack.kinds.context import target_failure
from fasttrack.kinds.switch.counters import counter_group, report_groups
from fasttrack.manifest.sections import (
    DEFAULT_MAX_PAIRS,
    DEFAULT_SLOWDOWN_MARGIN,
    DEFAULT_SPEED_ALPHA,
    Benchmark,
    SpeedPromise,
)
from fasttrack.probes.adapters import InProcessProbeTarget
from fasttrack.probes.base import CapabilityMissing, TargetContractError, TargetFailure, TargetUnreachable
from fasttrack.probes.sides import probe_side
from fasttrack.process.cpu import pin_single_thread
from fasttrack.targets.protocol import PathReporting

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.manifest import Manifest
    from fasttrack.plan.instance import CheckInstance
    from fasttrack.probes.base import ProbeTarget

MIN_PAIRS = 5
RATE_METRICS = {"decode_tokens_per_s_per_user": ("tokens/s/user", True), "tpot_ms": ("ms", False)}
CENSUS_METRICS = {
    "kernels_per_layer": ("kernels", "kernels_per_layer"),
    "per_layer_latency_us": ("µs", "us_per_layer"),
    "kernels_per_step": ("kernels", "kernels_per_step"),
    "per_step_latency_us": ("µs", "us_per_step"),
}


@dataclass(frozen=True)
class SpeedSpec:
    """What decides one point: the benchmark's alpha, its promises, its margin ("not slower than
    stock" elsewhere), the sequential cap, and how many points share its family of decisions."""

    alpha: float = DEFAULT_SPEED_ALPHA
    promises: tuple[SpeedPromise, ...] = ()
    max_pairs: int = DEFAULT_MAX_PAIRS
    repeats: int = 1
    margin: float = DEFAULT_SLOWDOWN_MARGIN
    family_points: int = 1

    def floor(self, promise: SpeedPromise | None) -> float:
        """The speed-up a point must be shown above: the promise, or 1 - margin."""
        return promise.min_speedup if promise is not None else 1.0 - self.margin

    @staticmethod
    def of(manifest: Manifest, name: str, family_points: int = 1) -> SpeedSpec:
        # An ablation arm ("<id>~<switch>") times like its benchmark; the promises are about all switches on.
        bench_id, arm, _switch = name.partition(ARM_SEPARATOR)
        found: Benchmark | None = next((b for b in manifest.benchmarks if b.id == bench_id), None)
        if found is None:
            return SpeedSpec()
        return SpeedSpec(
            found.alpha, () if arm else found.expect, found.max_pairs, int(found.repeats), found.margin, family_points
        )


def time_point(
    rate: Callable[[ProbeTarget], float],
    sides: dict[str, ProbeTarget],
    spec: SpeedSpec,
    promise: SpeedPromise | None,
    higher: bool,
    remaining_s: Callable[[], float],
) -> tuple[Comparison, SpeedDecision]:
    """Time counterbalanced pairs and decide: the fewest pairs that can decide first, then one pair
    at a time until the sequential test against the point's floor (`SpeedSpec.floor`) decides,
    ``max_pairs`` is reached or the instance's time would run out before another pair."""
    base_rates: list[float] = []
    cand_rates: list[float] = []

    def one_pair() -> float:
        started = time.monotonic()
        b, c = timed_pair(lambda: rate(sides["baseline"]), lambda: rate(sides["candidate"]), len(base_rates))
        base_rates.append(b)
        cand_rates.append(c)
        return time.monotonic() - started

    rate(sides["baseline"])  # one untimed warm-up per side
    rate(sides["candidate"])
    fixed = max(MIN_PAIRS, spec.repeats, min_pairs(spec.alpha))
    pair_s = max(one_pair() for _ in range(fixed))
    floor = spec.floor(promise)
    stopped = None
    seq = sequential(pair_ratios(base_rates, cand_rates, higher), floor, spec.alpha, bounds=False)
    while seq.decision == OPEN and len(base_rates) < spec.max_pairs:
        if remaining_s() < 3 * pair_s + 5:
            stopped = f"the instance's time limit left room for no more pairs after {len(base_rates)}"
            break
        pair_s = max(pair_s, one_pair())
        seq = sequential(pair_ratios(base_rates, cand_rates, higher), floor, spec.alpha, bounds=False)
    seq = sequential(pair_ratios(base_rates, cand_rates, higher), floor, spec.alpha)
    comparison = paired_ratio(base_rates, cand_rates, higher, spec.alpha)
    comparison = Comparison(
        comparison.ratio, (seq.lower, seq.upper), comparison.baseline, comparison.candidate, comparison.ratios
    )
    if promise is None:
        return comparison, within_margin(seq, spec.margin, spec.alpha, spec.max_pairs, stopped)
    return comparison, promised(seq, promise.min_speedup, spec.alpha, spec.max_pairs, stopped)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


@dataclass
class _Point:
    """One benchmark point being measured: what it asks and what it has found so far."""

    instance: CheckInstance
    context: RunContext
    bench: dict[str, Any]
    point: dict[str, Any]
    metric: str
    spec: SpeedSpec
    promise: SpeedPromise | None
    started: str
    clock: float
    measurements: dict[str, Any]

    def outcome(self, status: Status, **fields: Any) -> CheckOutcome:
        return self.context.outcome(
            self.instance, status, started_at=self.started, duration_s=time.monotonic() - self.clock, **fields
        )


@dataclass(frozen=True)
class _Measured:
    comparison: Comparison
    decision: SpeedDecision
    unit: str
    census: dict[str, dict[str, Any] | None]
    counted: dict[str, float] | None  # the candidate's own path counter during the census


def run(instance: CheckInstance, context: RunContext) -> list[CheckOutcome]:
    workload_kind = ((instance.config or {}).get("workload") or {}).get("kind")
    if workload_kind == "vllm_bench":
        from fasttrack.kinds.benchmarks import vllm_bench  # vLLM's own tool: its own module

        return vllm_bench.run(instance, context)
    if workload_kind == "sglang_bench":
        from fasttrack.kinds.benchmarks import sglang_bench  # SGLang's own tool

        return sglang_bench.run(instance, context)
    bench = dict(instance.config or {})
    point = instance.scope_point.as_dict() if instance.scope_point is not None else {}
    metric = bench.get("metric", "decode_tokens_per_s_per_user")
    spec = SpeedSpec.of(context.manifest, instance.name, int(bench.get("family_points", 1)))
    at = _Point(
        instance, context, bench, point, metric, spec, promise_at(spec.promises, point), utc_now(), time.monotonic(), {}
    )
    at.measurements = {"metric": metric, "point": point}
    threads = pin_single_thread(context.manifest, point)
    if threads is not None:
        at.measurements["cpu_threads"] = threads  # both sides alike; see fasttrack.process.cpu
    if metric not in RATE_METRICS and metric not in CENSUS_METRICS:
        reason = f"the built-in benchmark runner measures {', '.join([*RATE_METRICS, *CENSUS_METRICS])}, not {metric!r}"
        return [at.outcome(Status.NOT_RUN, reason_code="dependency", measurements=at.measurements, reason=reason)]
    base_meas = dict(at.measurements)
    try:
        measured = _measure(at)
    except TargetError as exc:
        status, code = target_failure(exc)
        return [at.outcome(status, reason_code=code, reason=str(exc), measurements=base_meas)]
    except CapabilityMissing as exc:  # e.g. a server without /tokenize: say what it lacks
        return [at.outcome(Status.NOT_RUN, reason_code="dependency", reason=str(exc), measurements=base_meas)]
    except TargetContractError as exc:
        reason = f"cannot read the target's answer: {exc}"
        return [at.outcome(Status.ERRORED, reason_code="target", reason=reason, measurements=base_meas)]
    except TargetUnreachable as exc:
        reason = f"the target could not be reached: {exc}"
        return [at.outcome(Status.ERRORED, reason_code="target", reason=reason, measurements=base_meas)]
    except TargetFailure as exc:
        reason = f"a benchmark request failed: {exc}"
        return [at.outcome(Status.FAILED, reason_code="crashed", reason=reason, measurements=base_meas)]
    if isinstance(measured, CheckOutcome):
        return [measured]
    return _outcomes(at, measured)


def _measure(at: _Point) -> _Measured | CheckOutcome:
    """Open both sides, take the kernel census, and time (or count) the metric."""
    context, point, metric = at.context, at.point, at.metric
    workload = at.bench.get("workload") or {}
    batch = int(point.get("batch", 1))
    input_tokens = int(workload.get("input_tokens", 128))
    output_tokens = max(2, int(workload.get("output_tokens", 64)))
    draft, folder = point.get("draft_length"), context.artifact_dir
    with (
        probe_side(context.manifest, "baseline", point, draft_length=draft, log_dir=folder) as baseline,
        probe_side(context.manifest, "candidate", point, draft_length=draft, log_dir=folder) as candidate,
    ):
        sides = {"baseline": baseline, "candidate": candidate}
        prompts = synthetic_prompts(sides["baseline"], batch, input_tokens)
        at.measurements.update(
            batch=batch,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            prefill="excluded (difference of a full and a one-token run)",
            order="alternating pairs, counterbalanced (AB BA AB ...)",
        )
        repeats = CENSUS_REPEATS["metric" if metric in CENSUS_METRICS else "record"]
        before = path_counter(sides["candidate"], context.manifest, point)
        census = harmonise_census({side: kernel_census(t, prompts, repeats=repeats) for side, t in sides.items()})
        counted = counter_delta(before, path_counter(sides["candidate"], context.manifest, point))
        if census["baseline"] is not None:
            at.measurements["kernel_census"] = census
        if metric in RATE_METRICS:
            unit, higher = RATE_METRICS[metric]

            def rate(target: ProbeTarget) -> float:
                value = decode_rate(target, prompts, output_tokens)
                return 1000.0 / value if metric == "tpot_ms" else value

            comparison, decision = time_point(rate, sides, at.spec, at.promise, higher, context.remaining_s)
            return _Measured(comparison, decision, unit, census, counted)
    return _counted_metric(at, census, counted)


def _counted_metric(
    at: _Point, census: dict[str, dict[str, Any] | None], counted: dict[str, float] | None
) -> _Measured | CheckOutcome:
    """A census metric (kernels or time per layer or step): one figure per side, no interval."""
    metric = at.metric
    unit, key = CENSUS_METRICS[metric]
    if census["baseline"] is None:
        reason = (
            f"{metric} needs both sides' kernel census: an in-process torch target's, or a server's from "
            "vLLM's torch profiler (--profiler-config)"
        )
        return at.outcome(Status.NOT_RUN, reason_code="dependency", measurements=at.measurements, reason=reason)
    unmeasured = [side for side in ("baseline", "candidate") if (census[side] or {}).get(key) is None]
    if unmeasured:
        return at.outcome(
            Status.NOT_RUN,
            reason_code="underpowered",
            measurements=at.measurements,
            reason=f"{metric}: the {' and '.join(unmeasured)} decode steps took no measurable time by "
            "difference of the profiled runs (below the profiler's noise); raise the workload's output_tokens",
        )
    b, c = (census["baseline"] or {})[key], (census["candidate"] or {})[key]
    comparison = Comparison(b / c if c else float("inf"), None, (b,), (c,), (b / c if c else float("inf"),))
    return _Measured(comparison, census_decision(comparison, metric, at.promise), unit, census, counted)


def _outcomes(at: _Point, measured: _Measured) -> list[CheckOutcome]:
    """The point's outcome, the census proof of path there, and the claims it measured."""
    comparison, decision, spec = measured.comparison, measured.decision, at.spec
    ci = comparison.ratio_ci
    measurements = at.measurements
    measurements.update(
        {
            "unit": measured.unit,
            "baseline": {"median": statistics.median(comparison.baseline), "runs": list(comparison.baseline)},
            "candidate": {"median": statistics.median(comparison.candidate), "runs": list(comparison.candidate)},
            "ratio": comparison.ratio,
            "ratio_ci": [_finite(ci[0]), _finite(ci[1])] if ci else None,
            "pair_ratios": list(comparison.ratios),
            "pairs": len(comparison.ratios) if at.metric in RATE_METRICS else None,
            "max_pairs": spec.max_pairs if at.metric in RATE_METRICS else None,
            **decision.measurements(spec.alpha, spec.family_points),
        }
    )
    if at.bench.get(DETECTED_KEY):  # the engine's flags forced speculative acceptance on these runs
        measurements["labels"] = ["synthetic_acceptance"]
        measurements["synthetic_acceptance"] = list(at.bench[DETECTED_KEY])
    results = [
        at.outcome(decision.status, reason_code=decision.reason_code, reason=decision.reason, measurements=measurements)
    ]
    manifest = at.context.manifest
    proof = judge_census(manifest, measured.census, at.point, measured.counted)
    if proof is not None:
        results.append(
            at.outcome(proof.status, id=f"{at.instance.id}#census", **proof_fields(manifest, proof, at.point))
        )
    results.extend(claim_outcomes(at.instance, at.context, at.bench, at.point, comparison, at.started))
    return results


def path_counter(target: ProbeTarget, manifest: Manifest, point: Mapping[str, Any]) -> dict[str, float] | None:
    """The in-process target's own counters for the switches on here: decode steps of each
    switch's optimised path (its path-report group, e.g. ``decode_steps_by_technique``), keyed
    by that path's name; None without a counter."""
    inner = target.target if isinstance(target, InProcessProbeTarget) else None
    if not isinstance(inner, PathReporting):
        return None
    found = inner.path_report()
    counts: dict[str, float] = {}
    for switch in manifest.switches:
        if manifest.switch_on(switch, "candidate") and switch.acts_at(point):
            group = counter_group(switch, "python")
            counts[switch.path_value] = report_groups(found, [group])[group].get(switch.path_value, 0.0)
    return counts


def counter_delta(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float] | None:
    if before is None or after is None:
        return None
    return {p: after.get(p, 0.0) - before.get(p, 0.0) for p in sorted(set(after) | set(before))}


def census_decision(comparison: Comparison, metric: str, promise: SpeedPromise | None) -> SpeedDecision:
    """A census metric is one deterministic count (kernels) or a fastest-of-3 time (no interval)."""
    if promise is None:  # one count per side: the bounds are the value itself
        return count_not_slower(comparison)
    if metric != "kernels_per_layer":
        return SpeedDecision(
            Status.NOT_RUN,
            "underpowered",
            f"{metric} is a profiled time without a confidence interval: it cannot decide the promised "
            f"{promise.min_speedup:g}x; promise speed with a rate metric (decode_tokens_per_s_per_user, tpot_ms)",
            "promised speed-up",
            promise.min_speedup,
            "census",
        )
    if comparison.ratio >= promise.min_speedup:
        return SpeedDecision(Status.PASSED, None, None, "promised speed-up", promise.min_speedup, "census count")
    return SpeedDecision(
        Status.FAILED,
        "regression",
        f"stock launches {comparison.ratio:.3f}x the candidate's kernels per layer, below the promised "
        f"{promise.min_speedup:g}x (kernel counts are deterministic: no interval)",
        "promised speed-up",
        promise.min_speedup,
        "census count",
    )
