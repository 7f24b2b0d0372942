"""Rules the JSON Schema cannot express, checked on schema-valid data.

Each rule returns Problems with the path of the offending value, so they print in the same
``file:line: $.path: message`` format as schema errors. Warnings never fail validation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from fasttrack.manifest.build import resolve_setup
from fasttrack.manifest.model import LOWER_IS_BETTER_METRICS, PRESERVED_FEATURES
from fasttrack.manifest.narrowing import narrowed_points
from fasttrack.manifest.placeholders import PLACEHOLDER_RE as _PLACEHOLDER
from fasttrack.manifest.placeholders import PLACEHOLDERS
from fasttrack.manifest.problems import Path, Problem
from fasttrack.manifest.scope import DIMENSIONS

MAX_DRAFT_LENGTH = 16

SPEEDUP_ROUNDING = 0.02  # published ratios are rounded; allow 2 % between values and ratio


def semantic_problems(data: Mapping[str, Any], broken: set[str] | frozenset[str] = frozenset()) -> list[Problem]:
    """Problems from every rule whose sections are present and schema-valid.

    ``broken`` names top-level sections that have schema errors: rules reading them are skipped
    (their data may have any shape), the others still run so that all errors show at once.
    """
    problems: list[Problem] = []
    for rule, needs, reads in _RULES:
        if any(not isinstance(data.get(name), dict) for name in needs):
            continue
        if broken & {*needs, *reads}:
            continue
        problems.extend(rule(data))
    return problems


def _error(path: Path, message: str) -> Problem:
    return Problem(path, message)


def _warning(path: Path, message: str) -> Problem:
    return Problem(path, message, severity="warning")


def _duplicates(items: Iterable[Mapping[str, Any]], path: Path, what: str, key: str = "id") -> Iterator[Problem]:
    seen: dict[Any, int] = {}
    for index, item in enumerate(items):
        value = item.get(key)
        if value in seen:
            yield _error((*path, index, key), f"duplicate {what} id {value!r} (also {path[-1]}[{seen[value]}])")
        else:
            seen[value] = index


def _increasing(values: list, path: Path, what: str) -> Iterator[Problem]:
    for index in range(1, len(values)):
        if values[index] <= values[index - 1]:
            yield _error(
                (*path, index), f"{what} must be strictly increasing ({values[index - 1]} then {values[index]})"
            )
            return


# --- switch -------------------------------------------------------------------------------


def _switch(data: Mapping[str, Any]) -> Iterator[Problem]:
    switch = data["switch"]
    enable = switch.get("enable") or {}
    if not any(enable.get(k) for k in ("engine_arg", "server_flag", "env")):
        yield _error(("switch", "enable"), "say how the switch is turned on: set engine_arg, server_flag or env")
    proof = switch.get("proof")
    if proof:
        if proof["source"] == "metrics" and not (proof.get("metric") and proof.get("label")):
            yield _error(
                ("switch", "proof"),
                "proof from metrics needs 'metric' (a counter name) and 'label' (the label naming the path)",
            )
        if proof["source"] == "inprocess" and data["target"]["kind"] != "python":
            yield _error(
                ("switch", "proof", "source"),
                "proof source 'inprocess' needs target kind 'python'; use 'metrics' for openai targets",
            )


# --- scope --------------------------------------------------------------------------------


def _scope(data: Mapping[str, Any]) -> Iterator[Problem]:
    scope = data["scope"]
    hardware = scope["hardware"]
    tp_union: set[int] = set()
    any_combo = False
    for index, entry in enumerate(hardware):
        path = ("scope", "hardware", index)
        tp_union.update(entry["tensor_parallel"])
        is_cpu = entry["accelerator"].strip().lower() == "cpu"
        if is_cpu:
            any_combo = True
            if entry.get("interconnect") in ("nvlink", "infiniband"):
                yield _error(
                    (*path, "interconnect"),
                    f"a cpu entry cannot use interconnect {entry['interconnect']!r}; use loopback",
                )
            continue
        for j, tp in enumerate(entry["tensor_parallel"]):
            if not any(count % tp == 0 for count in entry["device_counts"]):
                yield _error(
                    (*path, "tensor_parallel", j),
                    f"tensor_parallel {tp} divides none of the device counts {entry['device_counts']} of {entry['accelerator']}",
                )
            else:
                any_combo = True
    if not any_combo:
        yield _error(
            ("scope", "hardware"), "no hardware entry yields a valid (device_count, tensor_parallel) combination"
        )

    batch = scope.get("batch")
    if batch:
        if batch["min"] > batch["max"]:
            yield _error(("scope", "batch", "min"), f"batch min {batch['min']} is greater than max {batch['max']}")
        else:
            yield from _batch_points(batch)

    context = scope.get("context")
    if context and context.get("buckets"):
        buckets = context["buckets"]
        yield from _increasing(buckets, ("scope", "context", "buckets"), "context buckets")
        for j, bucket in enumerate(buckets):
            if bucket > context["max_tokens"]:
                yield _error(
                    ("scope", "context", "buckets", j),
                    f"context bucket {bucket} exceeds max_tokens {context['max_tokens']}",
                )

    spec = scope.get("speculative")
    if spec:
        lengths = spec["draft_lengths"]
        for j, length in enumerate(lengths):
            if not 1 <= length <= MAX_DRAFT_LENGTH:
                yield _error(
                    ("scope", "speculative", "draft_lengths", j),
                    f"draft length {length} is out of bounds (1..{MAX_DRAFT_LENGTH})",
                )
            if length in lengths[:j]:
                yield _error(("scope", "speculative", "draft_lengths", j), f"draft length {length} is listed twice")

    par = scope.get("parallelism") or {}
    if par.get("tensor"):
        for index, entry in enumerate(hardware):
            for j, tp in enumerate(entry["tensor_parallel"]):
                if tp not in par["tensor"]:
                    yield _error(
                        ("scope", "hardware", index, "tensor_parallel", j),
                        f"tensor_parallel {tp} is not listed in scope.parallelism.tensor {par['tensor']}",
                    )
        for j, tp in enumerate(par["tensor"]):
            if tp not in tp_union:
                yield _error(
                    ("scope", "parallelism", "tensor", j),
                    f"tensor degree {tp} appears in no hardware entry's tensor_parallel",
                )
    if any(d > 1 for d in par.get("decode_context") or ()):
        for index, entry in enumerate(hardware):
            multi = any(c > 1 for c in entry["device_counts"])
            if multi and entry["accelerator"].strip().lower() != "cpu" and entry.get("nvlink_domain") != "single":
                yield _error(
                    ("scope", "hardware", index),
                    "decode context parallelism > 1 needs every multi-GPU entry within one NVLink domain (interconnect: nvlink, nvlink_domain: single)",
                )


def _batch_points(batch: Mapping[str, Any]) -> Iterator[Problem]:
    for j, point in enumerate(batch.get("points") or ()):
        if not batch["min"] <= point <= batch["max"]:
            yield _error(
                ("scope", "batch", "points", j),
                f"batch point {point} is outside min..max ({batch['min']}..{batch['max']})",
            )


def _present_dimensions(scope: Mapping[str, Any]) -> set[str]:
    present = {"accelerator", "device_count", "tensor_parallel"}
    for name, key in (("batch", "batch"), ("dtype", "dtypes"), ("draft_length", "speculative"), ("context", "context")):
        if scope.get(key):
            present.add(name)
    return present


def _dimension_values(scope: Mapping[str, Any]) -> dict[str, set]:
    values: dict[str, set] = {
        "accelerator": {h["accelerator"] for h in scope["hardware"]},
        "device_count": {c for h in scope["hardware"] for c in h["device_counts"]},
        "tensor_parallel": {t for h in scope["hardware"] for t in h["tensor_parallel"]},
    }
    if scope.get("dtypes"):
        values["dtype"] = set(scope["dtypes"])
    if scope.get("speculative"):
        values["draft_length"] = set(scope["speculative"]["draft_lengths"])
    if scope.get("context"):
        values["context"] = set(scope["context"].get("buckets") or [scope["context"]["max_tokens"]])
    return values


# --- target -------------------------------------------------------------------------------


def _target(data: Mapping[str, Any]) -> Iterator[Problem]:
    target = data["target"]
    openai = target.get("openai")
    if target["kind"] != "openai" or not openai:
        return
    flag = (data["switch"].get("enable") or {}).get("server_flag")
    for side in ("baseline", "candidate"):
        conf = openai[side]
        path = ("target", "openai", side)
        command, url = conf.get("command"), conf.get("url")
        if bool(command) == bool(url):
            yield _error(
                path, "give exactly one of 'command' (fasttrack starts the server) or 'url' (a running server)"
            )
            continue
        if command:
            for arg in command:
                for name in _PLACEHOLDER.findall(arg):
                    if name not in PLACEHOLDERS:
                        yield _error(
                            (*path, "command"),
                            f"unknown placeholder {{{name}}} in {arg!r}; known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}",
                        )
            if not any("{port}" in arg for arg in command):
                yield _error((*path, "command"), "the command must contain '{port}' so fasttrack can pick a free port")
            if flag and side == "candidate" and flag not in command:
                yield _error((*path, "command"), f"the candidate command does not turn the switch on: it lacks {flag}")
            if flag and side == "baseline" and flag in command:
                yield _error(
                    (*path, "command"),
                    f"the baseline command turns the switch on ({flag}); the baseline is the stock path",
                )


# --- kernel tests, evals, divergence, features ---------------------------------------------


def _kernel_tests(data: Mapping[str, Any]) -> Iterator[Problem]:
    tests = data.get("kernel_tests") or []
    yield from _duplicates(tests, ("kernel_tests",), "kernel test")
    present = _present_dimensions(data["scope"])
    for index, test in enumerate(tests):
        for j, dim in enumerate(test.get("covers") or ()):
            if dim not in present:
                yield _error(
                    ("kernel_tests", index, "covers", j),
                    f"covers dimension {dim!r}, which the scope does not declare (declared: {', '.join(d for d in DIMENSIONS if d in present)})",
                )


def _evals(data: Mapping[str, Any]) -> Iterator[Problem]:
    evals = data.get("evals") or []
    yield from _duplicates(evals, ("evals",), "eval")
    for index, ev in enumerate(evals):
        path = ("evals", index)
        bins = ev.get("bins")
        if bins:
            yield from _increasing(bins["edges"], (*path, "bins", "edges"), "bin edges")
        seq = ev.get("sequential") or {}
        if seq.get("enabled") and ev.get("limit") and seq.get("min_samples", 0) > ev["limit"]:
            yield _error(
                (*path, "sequential", "min_samples"), f"min_samples {seq['min_samples']} exceeds limit {ev['limit']}"
            )


def _divergence(data: Mapping[str, Any]) -> Iterator[Problem]:
    div = data.get("divergence")
    if not div:
        return
    ids = [e["id"] for e in data.get("evals") or ()]
    source = div.get("prompts_from")
    if source is not None and source not in ids:
        yield _error(
            ("divergence", "prompts_from"), f"prompts_from {source!r} names no eval (evals: {', '.join(ids) or 'none'})"
        )
    if div.get("buckets"):
        yield from _increasing(div["buckets"], ("divergence", "buckets"), "divergence buckets")


def _narrowed_checks(data: Mapping[str, Any]) -> Iterator[Problem]:
    """Checks narrowed by ``points`` (evals, divergence, feature probes, the speculative check) may
    name only hardware values the scope declares."""
    values = _dimension_values(data["scope"])
    for path, _label, points in narrowed_points(data):
        for dim, chosen in points.items():
            for j, value in enumerate(chosen):
                yield from _point_in_scope(data["scope"], values, dim, value, (*path, dim, j))


def _features(data: Mapping[str, Any]) -> Iterator[Problem]:
    preserve = data["preserve"]
    for name, conf in (data.get("features") or {}).items():
        if name in PRESERVED_FEATURES and conf and conf.get("enabled", True) and not preserve.get(name, False):
            yield _error(("features", name), f"a probe for {name!r} is configured but preserve.{name} is not true")


# --- benchmarks ---------------------------------------------------------------------------


def _benchmarks(data: Mapping[str, Any]) -> Iterator[Problem]:
    benchmarks = data.get("benchmarks") or []
    yield from _duplicates(benchmarks, ("benchmarks",), "benchmark")
    claim_ids: dict[str, tuple] = {}
    values = _dimension_values(data["scope"])
    present = _present_dimensions(data["scope"])
    for index, bench in enumerate(benchmarks):
        path = ("benchmarks", index)
        for dim, points in (bench.get("points") or {}).items():
            if dim not in present:
                yield _error((*path, "points", dim), f"benchmark point dimension {dim!r} is not declared in the scope")
                continue
            for j, value in enumerate(points):
                yield from _point_in_scope(data["scope"], values, dim, value, (*path, "points", dim, j))
        expect = bench.get("expect")
        promises = [expect] if isinstance(expect, Mapping) else list(expect or ())
        for j, promise in enumerate(promises):
            ppath = (*path, "expect") if isinstance(expect, Mapping) else (*path, "expect", j)
            yield from _region_problems(data["scope"], values, present, promise.get("points") or {}, ppath)
            measured = bench.get("points") or {}
            apart = [
                d for d, vs in (promise.get("points") or {}).items() if d in measured and not set(vs) & set(measured[d])
            ]
            if apart:
                yield _error(
                    (*ppath, "points", apart[0]),
                    f"this promise's {apart[0]} values are none of the benchmark's points: it can never be judged",
                )
        for j, claim in enumerate(bench.get("claims") or ()):
            cpath = (*path, "claims", j)
            if claim["id"] in claim_ids:
                yield _error((*cpath, "id"), f"duplicate claim id {claim['id']!r}")
            claim_ids.setdefault(claim["id"], cpath)
            yield from _claim(bench, claim, cpath)


def _region_problems(
    scope: Mapping[str, Any], values: Mapping[str, set], present: Any, region: Mapping[str, Any], path: Path
) -> Iterator[Problem]:
    """A region's (``expect``/``census`` ``points``) dimensions are declared and its values in scope."""
    for dim, points in region.items():
        if dim not in present:
            yield _error((*path, "points", dim), f"point dimension {dim!r} is not declared in the scope")
            continue
        for j, value in enumerate(points):
            yield from _point_in_scope(scope, values, dim, value, (*path, "points", dim, j))


def _census_rules(data: Mapping[str, Any]) -> Iterator[Problem]:
    proof = data["switch"].get("proof") or {}
    census = proof.get("census")
    rules = [census] if isinstance(census, Mapping) else list(census or ())
    values, present = _dimension_values(data["scope"]), _present_dimensions(data["scope"])
    for j, rule in enumerate(rules):
        path: Path = ("switch", "proof", "census") if isinstance(census, Mapping) else ("switch", "proof", "census", j)
        yield from _region_problems(data["scope"], values, present, rule.get("points") or {}, path)
        for k, pattern in enumerate(rule.get("kernels_present") or ()):
            try:
                re.compile(pattern)
            except re.error as err:
                yield _error((*path, "kernels_present", k), f"not a regular expression: {err}")


def _point_in_scope(
    scope: Mapping[str, Any], values: Mapping[str, set], dim: str, value: Any, path: Path
) -> Iterator[Problem]:
    if dim == "batch":
        batch = scope["batch"]
        if batch["min"] > batch["max"]:
            return  # reported once at scope.batch
        if not isinstance(value, int) or not batch["min"] <= value <= batch["max"]:
            yield _error(path, f"batch {value!r} is outside scope.batch ({batch['min']}..{batch['max']})")
    elif value not in values.get(dim, set()):
        allowed = ", ".join(str(v) for v in sorted(values.get(dim, set()), key=str))
        yield _error(path, f"{dim} {value!r} is not in the scope (declared: {allowed})")


def _claim(bench: Mapping[str, Any], claim: Mapping[str, Any], path: Path) -> Iterator[Problem]:
    setups = {}
    for side in ("baseline", "candidate"):
        setup = resolve_setup(bench, claim, side)
        if setup is None:
            yield _error(
                (*path, side),
                f"claim {claim['id']!r} has no {side} setup: give the benchmark's setups.{side} or the claim's {side}.setup",
            )
        setups[side] = setup
    if setups["baseline"] is not None and setups["baseline"].get("switch") is True:
        yield _error((*path, "baseline"), "the baseline side of a claim must run with the switch off")
    if setups["candidate"] is not None and setups["candidate"].get("switch") is False:
        yield _error((*path, "candidate"), "the candidate side of a claim must run with the switch on")
    if setups["baseline"] is not None and setups["candidate"] is not None:
        keys = sorted((set(setups["baseline"]) | set(setups["candidate"])) - {"switch"})
        diffs = [
            f"{k} ({setups['baseline'].get(k)!r} vs {setups['candidate'].get(k)!r})"
            for k in keys
            if setups["baseline"].get(k) != setups["candidate"].get(k)
        ]
        if diffs and claim.get("comparable") is not False:
            yield _warning(
                path,
                f"claim {claim['id']!r} is not comparable: baseline and candidate setups differ in {', '.join(diffs)}; "
                "set 'comparable: false' to acknowledge (reports label it)",
            )
        if not diffs and claim.get("comparable") is False:
            yield _error((*path, "comparable"), "comparable is false but the two setups do not differ")

    conditions = claim.get("conditions") or {}
    if conditions.get("acceptance") == "synthetic" and "acceptance_length" not in conditions:
        yield _error((*path, "conditions"), "synthetic acceptance must state the acceptance_length it assumed")

    base, cand = claim["baseline"].get("value"), claim["candidate"].get("value")
    speedup = claim.get("speedup")
    if cand is None and speedup is None:
        yield _error(path, f"claim {claim['id']!r} states neither a candidate value nor a speedup")
    if isinstance(speedup, dict) and speedup["min"] > speedup["max"]:
        yield _error((*path, "speedup", "min"), f"speedup min {speedup['min']} is greater than max {speedup['max']}")
    if isinstance(speedup, (int, float)) and base and cand:
        lower_better = not bench.get("higher_is_better", bench["metric"] not in LOWER_IS_BETTER_METRICS)
        ratio = base / cand if lower_better else cand / base
        if abs(ratio - speedup) > SPEEDUP_ROUNDING * speedup:
            yield _error(
                (*path, "speedup"), f"speedup {speedup} does not match the values ({cand} vs {base} gives {ratio:.2f})"
            )


# --- audits -------------------------------------------------------------------------------


def _audits(data: Mapping[str, Any]) -> Iterator[Problem]:
    audits = data.get("audits") or []
    yield from _duplicates(audits, ("audits",), "audit")
    has_gpu = any(h["accelerator"].strip().lower() != "cpu" for h in data["scope"]["hardware"])
    for index, audit in enumerate(audits):
        path = ("audits", index)
        if audit["kind"] == "compute_sanitizer":
            if not audit.get("tools"):
                yield _error(
                    path, "a compute_sanitizer audit needs 'tools' (memcheck, racecheck, synccheck, initcheck)"
                )
            for key in ("delay_env", "delays_us"):
                if key in audit:
                    yield _error((*path, key), f"{key!r} applies to stress audits, not compute_sanitizer")
            if not has_gpu:
                yield _warning(
                    path, "compute-sanitizer needs an NVIDIA GPU, and the scope declares none: this audit can never run"
                )
        else:
            if "tools" in audit:
                yield _error((*path, "tools"), "'tools' applies to compute_sanitizer audits, not stress")
            if audit.get("delays_us") and not audit.get("delay_env"):
                yield _error((*path, "delays_us"), "delays_us needs delay_env (the variable the test reads)")


# rule, the sections it needs present, the optional sections it also reads
_RULES = (
    (_switch, ("switch", "target"), ()),
    (_scope, ("scope",), ()),
    (_target, ("target", "switch"), ()),
    (_kernel_tests, ("scope",), ("kernel_tests",)),
    (_evals, (), ("evals",)),
    (_divergence, (), ("divergence", "evals")),
    (_narrowed_checks, ("scope",), ("evals", "divergence", "features")),
    (_features, ("preserve",), ("features",)),
    (_benchmarks, ("scope",), ("benchmarks",)),
    (_census_rules, ("switch", "scope"), ()),
    (_audits, ("scope",), ("audits",)),
)
