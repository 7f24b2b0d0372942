"""Benchmarks: where the optimisation works, measured honestly, and the manifest's claims judged.

One check instance per benchmark and scope point (hardware setup × the benchmark's ``points``).

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

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fasttrack import claims as C
from fasttrack.errors import TargetError
from fasttrack.evidence import CheckOutcome, Status, utc_now
from fasttrack.probes.adapters import InProcessProbeTarget
from fasttrack.probes.base import CompletionRequest, ProbeTarget, TargetContractError, TargetFailure
from fasttrack.probes.full_context import long_prompt
from fasttrack.probes.sides import probe_side
from fasttrack.runners.cpu_threads import pin_single_thread

if TYPE_CHECKING:
    from fasttrack.instance import CheckInstance
    from fasttrack.runners.context import RunContext

MIN_PAIRS = 5
SLOWDOWN_TOLERANCE = 0.02
CONFIDENCE = 0.95
CENSUS_STEPS = 8
# Profiled calls per census side: the fastest of 3 when the census IS the benchmark's metric; one
# when it is only recorded beside a timed rate (its kernel count is deterministic, and on CPU each
# profiled call costs seconds of trace processing: 47 s of a 60 s batch-8 instance with 3).
CENSUS_REPEATS = {"metric": 3, "record": 1}
RATE_METRICS = {"decode_tokens_per_s_per_user": ("tokens/s/user", True), "tpot_ms": ("ms", False)}
CENSUS_METRICS = {"kernels_per_layer": ("kernels", "kernels_per_layer"), "per_layer_latency_us": ("µs", "us_per_layer")}


@dataclass(frozen=True)
class Comparison:
    ratio: float
    ratio_ci: tuple[float, float] | None
    baseline: tuple[float, ...]
    candidate: tuple[float, ...]
    ratios: tuple[float, ...]


def paired_ratio(
    baseline: Sequence[float],
    candidate: Sequence[float],
    higher_is_better: bool = True,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Comparison:
    """Median of per-pair ratios (> 1: candidate better) and a percentile-bootstrap CI of it."""
    from scipy.stats import bootstrap

    b, c = np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)
    ratios = c / b if higher_is_better else b / c
    median = float(np.median(ratios))
    ci: tuple[float, float] | None = None
    if len(ratios) >= 2:
        if np.ptp(ratios) == 0:
            ci = (median, median)
        else:
            res = bootstrap(
                (ratios,),
                np.median,
                confidence_level=confidence,
                n_resamples=4000,
                method="percentile",
                rng=np.random.default_rng(seed),
            )
            ci = (float(res.confidence_interval.low), float(res.confidence_interval.high))
    return Comparison(median, ci, tuple(map(float, b)), tuple(map(float, c)), tuple(map(float, ratios)))


def where_it_works(
    comparison: Comparison, tolerance: float = SLOWDOWN_TOLERANCE
) -> tuple[Status, str | None, str | None]:
    """The rule in the module docstring: (status, reason_code, reason)."""
    lo, hi = comparison.ratio_ci if comparison.ratio_ci else (comparison.ratio, comparison.ratio)
    if hi < 1.0:
        return (
            Status.FAILED,
            "regression",
            (
                f"the candidate is slower than stock at this in-scope point: speed-up "
                f"{comparison.ratio:.3f}x, {CONFIDENCE:.0%} CI [{lo:.3f}, {hi:.3f}] entirely below 1; "
                "narrow the declared scope or fix the path"
            ),
        )
    if comparison.ratio < 1.0 - tolerance:
        return (
            Status.NOT_RUN,
            "underpowered",
            (
                f"median speed-up {comparison.ratio:.3f}x suggests a slowdown but the CI "
                f"[{lo:.3f}, {hi:.3f}] reaches 1; run more repeats to decide"
            ),
        )
    return Status.PASSED, None, None


def alternate(
    run_baseline: Callable[[], float], run_candidate: Callable[[], float], pairs: int
) -> tuple[list[float], list[float]]:
    """ABAB...: one untimed warm-up each, then ``pairs`` alternating measured runs."""
    run_baseline()
    run_candidate()
    base, cand = [], []
    for _ in range(pairs):
        base.append(run_baseline())
        cand.append(run_candidate())
    return base, cand


def decode_rate(target: ProbeTarget, prompts: Sequence[tuple[int, ...]], output_tokens: int) -> float:
    """Decode tokens/s per user for one batch (prefill excluded by difference)."""
    full = [CompletionRequest(p, max_tokens=output_tokens, temperature=0.0, ignore_eos=True) for p in prompts]
    first = [CompletionRequest(p, max_tokens=1, temperature=0.0, ignore_eos=True) for p in prompts]
    start = time.perf_counter()
    outputs = target.complete_batch(full)
    t_full = time.perf_counter() - start
    start = time.perf_counter()
    target.complete_batch(first)
    t_first = time.perf_counter() - start
    generated = min(len(o[0].token_ids) for o in outputs)
    if generated < output_tokens:
        raise TargetFailure(f"asked for {output_tokens} tokens with ignore_eos, got {generated}")
    decode_s = t_full - t_first
    if decode_s <= 0:
        decode_s = t_full  # prefill dominated the noise; fall back to the whole call (slower, conservative)
    return (output_tokens - 1) / decode_s


def synthetic_prompts(target: ProbeTarget, batch: int, input_tokens: int) -> list[tuple[int, ...]]:
    """``batch`` distinct prompts of exactly ``input_tokens`` tokens (shifted windows of filler text)."""
    ids = long_prompt(target, input_tokens + batch)
    return [tuple(ids[i : i + input_tokens]) for i in range(batch)]


def kernel_census(
    target: ProbeTarget,
    prompts: Sequence[tuple[int, ...]],
    steps: int = CENSUS_STEPS,
    repeats: int = CENSUS_REPEATS["metric"],
) -> dict[str, Any] | None:
    """Census of one side (in-process torch targets only; None otherwise)."""
    if not isinstance(target, InProcessProbeTarget):
        return None
    from fasttrack.kernel_census import census

    def run(tokens: int) -> Callable[[], Any]:
        return lambda: target.complete_batch(
            [CompletionRequest(p, max_tokens=tokens, temperature=0.0, ignore_eos=True) for p in prompts]
        )

    engine = getattr(target.target, "engine", None)
    config = getattr(engine, "config", None)
    return {
        **census(
            run(1 + steps),
            run(1),
            steps,
            n_layers=getattr(config, "n_layers", None),
            model=getattr(engine, "model", None),
            repeats=repeats,
        ).to_dict(),
        "profiled_calls": repeats,
    }


def harmonise_census(census: dict[str, dict[str, Any] | None]) -> dict[str, dict[str, Any] | None]:
    """Both sides' per-layer figures by the same method: when one side's decode path bypasses the
    model's layer modules (its figure is per step / layers), the other's is computed that way too."""
    sides = [c for c in census.values() if c is not None]
    if len(sides) < 2 or len({c["layers_source"] for c in sides}) == 1:
        return census
    out: dict[str, dict[str, Any] | None] = {}
    for side, c in census.items():
        if c is None or c["layers_source"] == "divided_by_n_layers" or not c.get("layers"):
            out[side] = c
            continue
        us_step = c["us_per_step"]
        out[side] = {
            **c,
            "kernels_per_layer": c["kernels_per_step"] / c["layers"],
            "us_per_layer": us_step / c["layers"] if us_step is not None else None,
            "layers_source": "divided_by_n_layers",
            "per_layer_from_ranges": {"kernels": c["kernels_per_layer"], "us": c["us_per_layer"]},
        }
    return out


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


def claim_outcomes(
    instance: CheckInstance,
    context: RunContext,
    bench: Mapping[str, Any],
    point: Mapping[str, Any],
    comparison: Comparison,
    started: str,
) -> list[CheckOutcome]:
    """One ``claims`` outcome per claim of this benchmark whose conditions cover this point."""
    here = {"accelerator": point.get("accelerator"), "device_count": point.get("device_count", 1)}
    measured = [
        {
            "point": dict(point),
            "ratio": comparison.ratio,
            "ratio_ci": list(comparison.ratio_ci) if comparison.ratio_ci else None,
        }
    ]
    out = []
    for claim in bench.get("claims") or ():
        lint = C.lint_claim(bench, claim)
        if not C.point_matches(lint.conditions, point, lint.candidate_setup):
            continue
        assessed = C.assess_claim(lint, here, measured)
        status, code = {
            C.REPRODUCED: (Status.PASSED, None),
            C.NOT_REPRODUCED: (Status.FAILED, "regression"),
            C.NOT_COMPARABLE: (Status.NOT_RUN, "not_comparable"),
        }.get(assessed.status, (Status.NOT_RUN, "hardware" if assessed.reason.startswith("needs ") else "dependency"))
        out.append(
            context.outcome(
                instance,
                status,
                id=f"claims/{lint.claim_id}@{instance.scope_point.id if instance.scope_point is not None else 'global'}",
                kind="claims",
                name=lint.claim_id,
                required=False,
                started_at=started,
                reason_code=code,
                reason=None if status is Status.PASSED else assessed.reason,
                measurements={**assessed.measurements(), "point": dict(point), "assessment": assessed.reason},
            )
        )
    return out


def where_it_works_matrix(outcomes: Sequence[CheckOutcome]) -> list[dict[str, Any]]:
    """The where-it-works matrix from benchmark outcomes: one row per benchmarked scope point.

    ``verdict``: ``faster`` (CI above 1), ``no slower`` (CI contains 1, median not below the
    tolerance), ``undecided`` (median below it, CI reaching 1), ``slower`` (CI below 1, a failure),
    or the outcome's status when nothing was measured (``not_run``, ``errored``).
    """
    rows = []
    for outcome in outcomes:
        if outcome.kind != "benchmarks":
            continue
        m = outcome.measurements or {}
        ratio, ci = m.get("ratio"), m.get("ratio_ci")
        if ratio is None:
            verdict = outcome.status.value
        elif ci and ci[1] < 1.0:
            verdict = "slower"
        elif ci and ci[0] > 1.0:
            verdict = "faster"
        elif ratio < 1.0 - m.get("slowdown_tolerance", SLOWDOWN_TOLERANCE):
            verdict = "undecided"
        else:
            verdict = "no slower"
        rows.append(
            {
                "benchmark": outcome.name,
                "point": dict(outcome.scope_point or {}),
                "metric": m.get("metric"),
                "ratio": ratio,
                "ratio_ci": ci,
                "status": outcome.status.value,
                "verdict": verdict,
            }
        )
    try:
        return sorted(rows, key=lambda r: (r["benchmark"], sorted(r["point"].items())))
    except TypeError:  # mixed value types in one dimension: fall back to text order
        return sorted(rows, key=lambda r: (r["benchmark"], sorted((k, str(v)) for k, v in r["point"].items())))
