"""``benchmarks``: each deployment allowed by the benchmark's ``points`` × its other point
dimensions; ablation arms (``<id>~<switch>``) likewise, at the ablation's ``points`` and where
the switch acts."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fasttrack.evidence import ARM_SEPARATOR
from fasttrack.kinds.claims.lint import with_detected
from fasttrack.manifest import ScopePoint
from fasttrack.manifest.profiling import census_refusal
from fasttrack.manifest.sections import thaw

if TYPE_CHECKING:
    from fasttrack.plan import CheckInstance, Planner


def plan(planner: Planner) -> Iterable[CheckInstance]:
    m = planner.m
    for bench in m.benchmarks:
        yield from _benchmark(planner, bench)
    ablation = m.ablation
    if ablation is None:
        return
    benchmarks = {b.id: b for b in m.benchmarks}
    for arm, on, _switch in ablation.arms([s.name for s in m.switches]):
        for ident in ablation.benchmarks:
            bench = benchmarks[ident]
            yield from _benchmark(planner, bench, arm=arm, required=ablation.required and bench.required, on=on)


def _benchmark(
    planner: Planner, bench: Any, arm: str | None = None, required: bool | None = None, on: tuple[str, ...] = ()
) -> Iterable[CheckInstance]:
    points = bench.points
    deployment = set(planner.m.scope.deployment_dimensions())
    other = {k: v for k, v in points.items() if k not in deployment}
    workload = bench.workload
    # synthetic runs (forced acceptance): the outcome and every claim measured with them say so
    name, config = bench.id, with_detected(planner.m.data, thaw(bench.raw))
    own = server_args(bench.raw)
    if own:  # its own server settings: servers of its own (Manifest.for_config), shared with benchmarks that agree
        config = {**config, "engine_args": own}
    if arm is not None:
        # One arm: stock against this switch alone (or all but it). Claims are about all switches on.
        config = {**{k: v for k, v in config.items() if k != "claims"}, "arm": list(on)}
        name = f"{bench.id}{ARM_SEPARATOR}{arm}"
    planned = []
    for setup in planner.narrowed({k: v for k, v in points.items() if k in deployment}):
        rate = planner.rate(setup)
        cost = 2 * bench.repeats * workload.get("requests", 8) * workload.get("output_tokens", 128) / rate
        if arm is not None and not planner.arm_here(arm, setup):
            continue
        planned += [(ScopePoint.of({**setup.as_dict(), **combo}), cost) for combo in _product(other)]
    # the family of timing decisions its alpha is spent over (the union bound: decide.py)
    config = {**config, "family_points": len(planned)}
    # a census metric on a server without the torch profiler has nothing to read (validate refuses it)
    refusal = census_refusal(planner.m.data, thaw(bench.raw))
    for point, cost in planned:
        instance = planner.make(
            "benchmarks",
            name,
            point,
            bench.required if required is None else required,
            max(10.0, cost) + planner.startup(),
            config,
            timeout=bench.timeout_s,
            # a vllm target runs it through its own interpreter where the console script cannot run
            command="vllm" if workload.get("kind") == "vllm_bench" and planner.m.target.kind != "vllm" else None,
            module=_bench_module(planner, workload),
        )
        if refusal is not None:  # runnable nowhere: this reason before any of this machine's
            instance = replace(
                instance, runnable=False, reason_code="dependency", reason=refusal, needs="torch profiler"
            )
        yield instance


def _bench_module(planner: Planner, workload: Mapping[str, Any]) -> str | None:
    """The Python module a sglang_bench workload needs in fasttrack's interpreter (an ``sglang``
    target runs the client with its servers' interpreter, which its target check covers)."""
    if workload.get("kind") != "sglang_bench" or planner.m.target.kind == "sglang":
        return None
    return "sglang"


def server_args(raw: Mapping[str, Any]) -> dict[str, list[str]]:
    """The benchmark's own server arguments per side (``setups.<side>.engine_args``), where given."""
    setups = raw.get("setups") or {}
    found = {
        side: [str(a) for a in (setups.get(side) or {}).get("engine_args") or ()] for side in ("baseline", "candidate")
    }
    return {side: args for side, args in found.items() if args}


def _product(dims: Mapping[str, tuple]) -> Iterable[dict[str, Any]]:
    names = list(dims)
    for combo in itertools.product(*(dims[n] for n in names)):
        yield dict(zip(names, combo))
