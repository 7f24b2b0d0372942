"""The benchmark runner: one scope point, both sides opened, timed in alternation, judged."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fasttrack.errors import TargetError
from fasttrack.evidence import CheckOutcome, Status, utc_now
from fasttrack.manifest.model import DEFAULT_MAX_PAIRS, DEFAULT_SPEED_ALPHA, Benchmark, SpeedPromise
from fasttrack.probes.base import TargetContractError, TargetFailure
from fasttrack.probes.sides import probe_side
from fasttrack.runners.benchmarks.census import CENSUS_REPEATS, harmonise_census, kernel_census
from fasttrack.runners.benchmarks.claims import claim_outcomes
from fasttrack.runners.benchmarks.rule import (
    SLOWDOWN_TOLERANCE,
    Comparison,
    SpeedDecision,
    not_slower,
    pair_ratios,
    paired_ratio,
    promise_at,
    promised,
)
from fasttrack.runners.benchmarks.speed import OPEN, min_pairs, sequential
from fasttrack.runners.benchmarks.timing import decode_rate, synthetic_prompts, timed_pair
from fasttrack.runners.cpu_threads import pin_single_thread

if TYPE_CHECKING:
    from fasttrack.instance import CheckInstance
    from fasttrack.manifest import Manifest
    from fasttrack.probes.base import ProbeTarget
    from fasttrack.runners.context import RunContext

MIN_PAIRS = 5
RATE_METRICS = {"decode_tokens_per_s_per_user": ("tokens/s/user", True), "tpot_ms": ("ms", False)}
CENSUS_METRICS = {"kernels_per_layer": ("kernels", "kernels_per_layer"), "per_layer_latency_us": ("µs", "us_per_layer")}


@dataclass(frozen=True)
class SpeedSpec:
    """What decides one point: the benchmark's alpha, its promises and the sequential cap."""

    alpha: float = DEFAULT_SPEED_ALPHA
    promises: tuple[SpeedPromise, ...] = ()
    max_pairs: int = DEFAULT_MAX_PAIRS
    repeats: int = 1

    @staticmethod
    def of(manifest: Manifest, name: str) -> SpeedSpec:
        found: Benchmark | None = next((b for b in manifest.benchmarks if b.id == name), None)
        if found is None:
            return SpeedSpec()
        return SpeedSpec(found.alpha, found.expect, found.max_pairs, int(found.repeats))


def time_point(
    rate: Callable[[ProbeTarget], float],
    sides: dict[str, ProbeTarget],
    spec: SpeedSpec,
    promise: SpeedPromise | None,
    higher: bool,
    remaining_s: Callable[[], float],
) -> tuple[Comparison, SpeedDecision]:
    """Time counterbalanced pairs and decide: a fixed number for "not slower than stock"; for a
    promise, one pair at a time after that until the sequential test decides, ``max_pairs`` is
    reached or the instance's time would run out before another pair."""
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
    if promise is None:
        comparison = paired_ratio(base_rates, cand_rates, higher, spec.alpha)
        return comparison, not_slower(comparison, spec.alpha, SLOWDOWN_TOLERANCE)
    stopped = None
    seq = sequential(pair_ratios(base_rates, cand_rates, higher), promise.min_speedup, spec.alpha)
    while seq.decision == OPEN and len(base_rates) < spec.max_pairs:
        if remaining_s() < 3 * pair_s + 5:
            stopped = f"the instance's time limit left room for no more pairs after {len(base_rates)}"
            break
        pair_s = max(pair_s, one_pair())
        seq = sequential(pair_ratios(base_rates, cand_rates, higher), promise.min_speedup, spec.alpha)
    comparison = paired_ratio(base_rates, cand_rates, higher, spec.alpha)
    comparison = Comparison(
        comparison.ratio, (seq.lower, seq.upper), comparison.baseline, comparison.candidate, comparison.ratios
    )
    return comparison, promised(seq, promise.min_speedup, spec.alpha, spec.max_pairs, stopped)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def run(instance: CheckInstance, context: RunContext) -> list[CheckOutcome]:
    started, clock = utc_now(), time.monotonic()
    bench = dict(instance.config or {})
    point = instance.scope_point.as_dict() if instance.scope_point is not None else {}
    metric = bench.get("metric", "decode_tokens_per_s_per_user")
    spec = SpeedSpec.of(context.manifest, instance.name)
    promise = promise_at(spec.promises, point)

    def outcome(status: Status, **fields: Any) -> CheckOutcome:
        return context.outcome(instance, status, started_at=started, duration_s=time.monotonic() - clock, **fields)

    base_meas: dict[str, Any] = {"metric": metric, "point": point}
    threads = pin_single_thread(context.manifest, point)
    if threads is not None:
        base_meas["cpu_threads"] = threads  # both sides alike; see fasttrack.runners.cpu_threads
    if metric not in RATE_METRICS and metric not in CENSUS_METRICS:
        return [
            outcome(
                Status.NOT_RUN,
                reason_code="dependency",
                measurements=base_meas,
                reason=f"the built-in benchmark runner measures {', '.join([*RATE_METRICS, *CENSUS_METRICS])}, not {metric!r}",
            )
        ]
    workload = bench.get("workload") or {}
    batch = int(point.get("batch", 1))
    input_tokens = int(workload.get("input_tokens", 128))
    output_tokens = max(2, int(workload.get("output_tokens", 64)))
    draft = point.get("draft_length")
    try:
        with (
            probe_side(
                context.manifest, "baseline", point, draft_length=draft, log_dir=context.artifact_dir
            ) as baseline,
            probe_side(
                context.manifest, "candidate", point, draft_length=draft, log_dir=context.artifact_dir
            ) as candidate,
        ):
            sides = {"baseline": baseline, "candidate": candidate}
            prompts = synthetic_prompts(sides["baseline"], batch, input_tokens)
            measurements = dict(
                base_meas,
                batch=batch,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                prefill="excluded (difference of a full and a one-token run)",
                order="alternating pairs, counterbalanced (AB BA AB ...)",
            )
            repeats = CENSUS_REPEATS["metric" if metric in CENSUS_METRICS else "record"]
            census = harmonise_census({side: kernel_census(t, prompts, repeats=repeats) for side, t in sides.items()})
            if census["baseline"] is not None:
                measurements["kernel_census"] = census
            if metric in RATE_METRICS:
                unit, higher = RATE_METRICS[metric]

                def rate(target: ProbeTarget) -> float:
                    value = decode_rate(target, prompts, output_tokens)
                    return 1000.0 / value if metric == "tpot_ms" else value

                comparison, decision = time_point(rate, sides, spec, promise, higher, context.remaining_s)
            else:
                unit, key = CENSUS_METRICS[metric]
                if census["baseline"] is None:
                    return [
                        outcome(
                            Status.NOT_RUN,
                            reason_code="dependency",
                            measurements=measurements,
                            reason=f"{metric} needs a per-layer kernel census of an in-process torch target",
                        )
                    ]
                unmeasured = [side for side in ("baseline", "candidate") if (census[side] or {}).get(key) is None]
                if unmeasured:
                    return [
                        outcome(
                            Status.NOT_RUN,
                            reason_code="underpowered",
                            measurements=measurements,
                            reason=f"{metric}: the {' and '.join(unmeasured)} decode steps took no measurable time by "
                            "difference of the profiled runs (below the profiler's noise); raise the workload's output_tokens",
                        )
                    ]
                b, c = (census["baseline"] or {})[key], (census["candidate"] or {})[key]
                comparison = Comparison(b / c if c else float("inf"), None, (b,), (c,), (b / c if c else float("inf"),))
                decision = census_decision(comparison, metric, promise)
    except TargetError as exc:
        return [outcome(Status.ERRORED, reason_code="target", reason=str(exc), measurements=base_meas)]
    except TargetContractError as exc:
        return [
            outcome(
                Status.ERRORED,
                reason_code="target",
                reason=f"cannot read the target's answer: {exc}",
                measurements=base_meas,
            )
        ]
    except TargetFailure as exc:
        return [
            outcome(
                Status.FAILED,
                reason_code="crashed",
                reason=f"a benchmark request failed: {exc}",
                measurements=base_meas,
            )
        ]
    ci = comparison.ratio_ci
    measurements.update(
        {
            "unit": unit,
            "baseline": {"median": statistics.median(comparison.baseline), "runs": list(comparison.baseline)},
            "candidate": {"median": statistics.median(comparison.candidate), "runs": list(comparison.candidate)},
            "ratio": comparison.ratio,
            "ratio_ci": [_finite(ci[0]), _finite(ci[1])] if ci else None,
            "pair_ratios": list(comparison.ratios),
            "pairs": len(comparison.ratios) if metric in RATE_METRICS else None,
            "max_pairs": spec.max_pairs if promise is not None else None,
            "slowdown_tolerance": SLOWDOWN_TOLERANCE,
            **decision.measurements(spec.alpha),
        }
    )
    results = [
        outcome(decision.status, reason_code=decision.reason_code, reason=decision.reason, measurements=measurements)
    ]
    results.extend(claim_outcomes(instance, context, bench, point, comparison, started))
    return results


def census_decision(comparison: Comparison, metric: str, promise: SpeedPromise | None) -> SpeedDecision:
    """A census metric is one deterministic count (kernels) or a fastest-of-3 time (no interval)."""
    if promise is None:  # one count per side: the bounds are the value itself
        return not_slower(comparison)
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
