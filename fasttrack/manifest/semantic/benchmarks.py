"""Rules of the benchmarks: their points and promises, vllm_bench and sglang_bench workloads, and claims."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from fasttrack.manifest.build import resolve_setup, setup_differences, switch_args
from fasttrack.manifest.placeholders import PLACEHOLDER_RE, PLACEHOLDERS
from fasttrack.manifest.problems import Path, Problem
from fasttrack.manifest.profiling import census_refusal
from fasttrack.manifest.sections import SERVER_KINDS, lower_is_better, metric_unit
from fasttrack.manifest.semantic.common import (
    dimension_values,
    duplicates,
    engine_dimensions,
    error,
    point_in_scope,
    present_dimensions,
    region_problems,
    switch_entries,
    warning,
)
from fasttrack.manifest.semantic.vllm_target import OWN_FLAGS
from fasttrack.manifest.sglang_bench import RESERVED_ARGS as SGLANG_RESERVED
from fasttrack.manifest.sglang_bench import RESULT_FIELD as SGLANG_FIELD
from fasttrack.manifest.sglang_launch import OWN_FLAGS as SGLANG_OWN_FLAGS
from fasttrack.manifest.vllm_bench import RESERVED_ARGS, normalised_arg

SPEEDUP_ROUNDING = 0.02  # published ratios are rounded; allow 2 % between values and ratio


def benchmarks(data: Mapping[str, Any]) -> Iterator[Problem]:
    benchmarks = data.get("benchmarks") or []
    yield from duplicates(benchmarks, ("benchmarks",), "benchmark")
    claim_ids: dict[str, tuple] = {}
    own = switch_args(data)  # the switches' own flags: a candidate passing them is no setup difference
    values = dimension_values(data["scope"])
    present = present_dimensions(data["scope"])
    for index, bench in enumerate(benchmarks):
        path = ("benchmarks", index)
        for dim, points in (bench.get("points") or {}).items():
            if dim not in present:
                yield error((*path, "points", dim), f"benchmark point dimension {dim!r} is not declared in the scope")
                continue
            for j, value in enumerate(points):
                yield from point_in_scope(data["scope"], values, dim, value, (*path, "points", dim, j))
        expect = bench.get("expect")
        promises = [expect] if isinstance(expect, Mapping) else list(expect or ())
        for j, promise in enumerate(promises):
            ppath = (*path, "expect") if isinstance(expect, Mapping) else (*path, "expect", j)
            yield from region_problems(data["scope"], values, present, promise.get("points") or {}, ppath)
            measured = bench.get("points") or {}
            apart = [
                d for d, vs in (promise.get("points") or {}).items() if d in measured and not set(vs) & set(measured[d])
            ]
            if apart:
                yield error(
                    (*ppath, "points", apart[0]),
                    f"this promise's {apart[0]} values are none of the benchmark's points: it can never be judged",
                )
        yield from _vllm_bench(data, bench, path)
        refusal = census_refusal(data, bench)
        if refusal:
            yield error((*path, "metric"), refusal)
        yield from _server_args(data, bench, path)
        for metric, bounds in (bench.get("assertions") or {}).items():
            if bounds.get("min") is not None and bounds.get("max") is not None and bounds["min"] > bounds["max"]:
                yield error((*path, "assertions", metric), f"min {bounds['min']} is greater than max {bounds['max']}")
        for j, claim in enumerate(bench.get("claims") or ()):
            cpath = (*path, "claims", j)
            if claim["id"] in claim_ids:
                yield error((*cpath, "id"), f"duplicate claim id {claim['id']!r}")
            claim_ids.setdefault(claim["id"], cpath)
            yield from _claim(bench, claim, cpath, own)


VLLM_FIELD = re.compile(
    r"^((mean|median|std|p[0-9]+(\.[0-9]+)?)_(ttft|tpot|itl|e2el)_ms|request_throughput|request_goodput"
    r"|output_throughput|total_token_throughput|max_output_tokens_per_s)$"
)


BENCH_TOOLS = {
    # workload kind: (the tool as users call it, its result fields, what they are fields of)
    "vllm_bench": ("vllm bench serve", VLLM_FIELD, "vLLM's result JSON (median_tpot_ms, output_throughput ...)"),
    "sglang_bench": (
        "python -m sglang.bench_serving",
        SGLANG_FIELD,
        "SGLang's result line (median_tpot_ms, median_e2e_latency_ms, output_throughput ...)",
    ),
}
RESERVED = {"vllm_bench": RESERVED_ARGS, "sglang_bench": SGLANG_RESERVED}


def _vllm_bench(data: Mapping[str, Any], bench: Mapping[str, Any], path: Path) -> Iterator[Problem]:
    """A vllm_bench (or sglang_bench) workload as perf-eval's parse_workload checks one, plus what
    fasttrack needs."""
    workload = bench.get("workload") or {}
    kind = workload.get("kind")
    if kind not in BENCH_TOOLS:
        if VLLM_FIELD.match(str(bench.get("metric"))):
            yield error(
                (*path, "metric"),
                f"metric {bench['metric']!r} is a field of vllm bench serve's result: use workload.kind vllm_bench",
            )
        elif SGLANG_FIELD.match(str(bench.get("metric"))):
            yield error(
                (*path, "metric"),
                f"metric {bench['metric']!r} is a field of sglang.bench_serving's result: use workload.kind sglang_bench",
            )
        return
    tool, fields, source = BENCH_TOOLS[kind]
    wpath = (*path, "workload")
    target = data.get("target")
    allowed = ("openai", "sglang") if kind == "sglang_bench" else ("openai", "vllm")
    if isinstance(target, dict) and target.get("kind") not in allowed:
        yield error(
            (*wpath, "kind"),
            f"a {kind} workload runs `{tool}` against servers: it needs target.kind {' or '.join(allowed)}",
        )
    if not fields.match(str(bench.get("metric"))):
        yield error(
            (*path, "metric"),
            f"a {kind} benchmark compares a field of {source}, not {bench.get('metric')!r}",
        )
    for key in ("input_len", "output_len", "num_prompts"):
        if key not in workload:
            yield error(wpath, f"a {kind} workload needs {key}")
    prompts, levels = workload.get("num_prompts"), workload.get("max_concurrency", 1)
    if isinstance(prompts, list) and len(prompts) != (len(levels) if isinstance(levels, list) else 1):
        yield error(
            (*wpath, "num_prompts"),
            f"num_prompts lists {len(prompts)} values for {len(levels) if isinstance(levels, list) else 1} "
            "max_concurrency value(s): give one per concurrency, or one number for all",
        )
    reps = workload.get("repetitions", 1)
    if isinstance(reps, int) and reps % 2 == 0:
        yield error((*wpath, "repetitions"), f"repetitions must be odd (the median of {reps} runs is no run's value)")
    seen: set[str] = set()
    for name in workload.get("args") or {}:
        flag = normalised_arg(str(name))
        if flag in RESERVED[kind]:
            yield error((*wpath, "args", name), f"args cannot set --{flag}: fasttrack sets it for each run")
        elif flag in seen:
            yield error((*wpath, "args", name), f"args gives --{flag} twice")
        seen.add(flag)


def _server_args(data: Mapping[str, Any], bench: Mapping[str, Any], path: Path) -> Iterator[Problem]:
    """A benchmark's ``setups.<side>.engine_args`` start servers of its own: refused where the target
    cannot be given them (never run without them), and never the switches' own flags."""
    target: Mapping[str, Any] = data["target"] if isinstance(data.get("target"), dict) else {}
    kind = target.get("kind")
    engine = engine_dimensions(data["scope"])
    switches = [s for _p, s in switch_entries(data)]
    for side in ("baseline", "candidate"):
        args = [str(a) for a in ((bench.get("setups") or {}).get(side) or {}).get("engine_args") or ()]
        where = (*path, "setups", side, "engine_args")
        if not args:
            continue
        if kind not in SERVER_KINDS:
            yield error(
                where,
                f"engine_args are server arguments, which an in-process target (target.kind {kind}) cannot be "
                "given: they would never reach it (set factory options in target.python.options, or leave them out)",
            )
            continue
        conf = (target.get("openai") or {}).get(side) or {}
        if kind == "openai" and conf.get("url"):
            yield error(
                where,
                f"the {side} server is a running server at a url (target.openai.{side}.url): fasttrack cannot start "
                "it with these engine_args; give a command",
            )
        for index, arg in enumerate(args):
            flag = arg.split("=", 1)[0]
            if (kind == "vllm" and flag in OWN_FLAGS) or (kind == "sglang" and flag in SGLANG_OWN_FLAGS):
                yield error((*where, index), f"{flag} is set by fasttrack: leave it out of engine_args")
            for name in PLACEHOLDER_RE.findall(arg):
                if name not in (*PLACEHOLDERS, *engine) or name == "port":
                    yield error((*where, index), f"unknown placeholder {{{name}}} in {arg!r}")
            for switch in switches:
                on = switch.get("enable") or {}
                if side == "baseline" and on.get("server_flag") and flag == on["server_flag"]:
                    yield error(
                        (*where, index),
                        f"the baseline's engine_args turn the switch {switch['name']!r} on ({flag}); "
                        "the baseline is the stock path",
                    )


def _claim(
    bench: Mapping[str, Any], claim: Mapping[str, Any], path: Path, own: Mapping[str, bool]
) -> Iterator[Problem]:
    setups = {}
    for side in ("baseline", "candidate"):
        setup = resolve_setup(bench, claim, side)
        if setup is None:
            yield error(
                (*path, side),
                f"claim {claim['id']!r} has no {side} setup: give the benchmark's setups.{side} or the claim's {side}.setup",
            )
        setups[side] = setup
    if setups["baseline"] is not None and setups["baseline"].get("switch") is True:
        yield error((*path, "baseline"), "the baseline side of a claim must run with the switch off")
    if setups["candidate"] is not None and setups["candidate"].get("switch") is False:
        yield error((*path, "candidate"), "the candidate side of a claim must run with the switch on")
    if setups["baseline"] is not None and setups["candidate"] is not None:
        diffs = [
            f"{k} ({setups['baseline'].get(k)!r} vs {setups['candidate'].get(k)!r})"
            for k in setup_differences(setups["baseline"], setups["candidate"], own)
        ]
        if diffs and claim.get("comparable") is not False:
            yield warning(
                path,
                f"claim {claim['id']!r} is not comparable: baseline and candidate setups differ in {', '.join(diffs)}; "
                "set 'comparable: false' to acknowledge (reports label it)",
            )
        if not diffs and claim.get("comparable") is False:
            yield error((*path, "comparable"), "comparable is false but the two setups do not differ")

    conditions = claim.get("conditions") or {}
    if conditions.get("acceptance") == "synthetic" and "acceptance_length" not in conditions:
        yield error((*path, "conditions"), "synthetic acceptance must state the acceptance_length it assumed")

    base, cand = claim["baseline"].get("value"), claim["candidate"].get("value")
    speedup = claim.get("speedup")
    difference = claim.get("difference")
    if cand is None and speedup is None and difference is None:
        yield error(path, f"claim {claim['id']!r} states neither a candidate value, a speedup nor a difference")
    unit = metric_unit(str(bench.get("metric")))
    if difference is not None and difference["unit"] != unit:
        yield error(
            (*path, "difference", "unit"),
            f"a difference is stated in the benchmark metric's unit: {bench.get('metric')} is measured in "
            f"{unit or 'no known unit'}, not {difference['unit']}",
        )
    if isinstance(speedup, dict) and speedup["min"] > speedup["max"]:
        yield error((*path, "speedup", "min"), f"speedup min {speedup['min']} is greater than max {speedup['max']}")
    if isinstance(speedup, (int, float)) and base and cand:
        lower_better = not bench.get("higher_is_better", not lower_is_better(bench["metric"]))
        ratio = base / cand if lower_better else cand / base
        if abs(ratio - speedup) > SPEEDUP_ROUNDING * speedup:
            yield error(
                (*path, "speedup"), f"speedup {speedup} does not match the values ({cand} vs {base} gives {ratio:.2f})"
            )
