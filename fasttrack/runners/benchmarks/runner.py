"""The benchmark runner: one scope point, both sides opened, timed in alternation, judged."""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any

from fasttrack.errors import TargetError
from fasttrack.evidence import CheckOutcome, Status, utc_now
from fasttrack.probes.base import TargetContractError, TargetFailure
from fasttrack.probes.sides import probe_side
from fasttrack.runners.benchmarks.census import CENSUS_REPEATS, harmonise_census, kernel_census
from fasttrack.runners.benchmarks.claims import claim_outcomes
from fasttrack.runners.benchmarks.rule import SLOWDOWN_TOLERANCE, Comparison, paired_ratio, where_it_works
from fasttrack.runners.benchmarks.timing import alternate, decode_rate, synthetic_prompts
from fasttrack.runners.cpu_threads import pin_single_thread

if TYPE_CHECKING:
    from fasttrack.plan import CheckInstance
    from fasttrack.runners.context import RunContext

MIN_PAIRS = 5
RATE_METRICS = {"decode_tokens_per_s_per_user": ("tokens/s/user", True), "tpot_ms": ("ms", False)}
CENSUS_METRICS = {"kernels_per_layer": ("kernels", "kernels_per_layer"), "per_layer_latency_us": ("µs", "us_per_layer")}


def run(instance: CheckInstance, context: RunContext) -> list[CheckOutcome]:
    started, clock = utc_now(), time.monotonic()
    bench = dict(instance.config or {})
    point = instance.scope_point.as_dict() if instance.scope_point is not None else {}
    metric = bench.get("metric", "decode_tokens_per_s_per_user")

    def outcome(status: Status, **fields: Any) -> CheckOutcome:
        return context.outcome(instance, status, started_at=started, duration_s=time.monotonic() - clock, **fields)

    base_meas = {"metric": metric, "point": point}
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
                order="alternating ABAB",
            )
            repeats = CENSUS_REPEATS["metric" if metric in CENSUS_METRICS else "record"]
            census = harmonise_census({side: kernel_census(t, prompts, repeats=repeats) for side, t in sides.items()})
            if census["baseline"] is not None:
                measurements["kernel_census"] = census
            if metric in RATE_METRICS:
                unit, higher = RATE_METRICS[metric]
                pairs = max(MIN_PAIRS, int(bench.get("repeats", 1)))
                base_rates, cand_rates = alternate(
                    lambda: decode_rate(sides["baseline"], prompts, output_tokens),
                    lambda: decode_rate(sides["candidate"], prompts, output_tokens),
                    pairs,
                )
                if metric == "tpot_ms":
                    base_rates, cand_rates = [1000.0 / r for r in base_rates], [1000.0 / r for r in cand_rates]
                comparison = paired_ratio(base_rates, cand_rates, higher_is_better=higher)
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
    measurements.update(
        {
            "unit": unit,
            "baseline": {"median": statistics.median(comparison.baseline), "runs": list(comparison.baseline)},
            "candidate": {"median": statistics.median(comparison.candidate), "runs": list(comparison.candidate)},
            "ratio": comparison.ratio,
            "ratio_ci": list(comparison.ratio_ci) if comparison.ratio_ci else None,
            "pair_ratios": list(comparison.ratios),
            "slowdown_tolerance": SLOWDOWN_TOLERANCE,
        }
    )
    status, code, reason = where_it_works(comparison)
    results = [outcome(status, reason_code=code, reason=reason, measurements=measurements)]
    results.extend(claim_outcomes(instance, context, bench, point, comparison, started))
    return results
