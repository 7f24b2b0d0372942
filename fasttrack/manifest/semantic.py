"""Rules the JSON Schema cannot express, checked on schema-valid data.

Each rule returns Problems with the path of the offending value, so they print in the same
``file:line: $.path: message`` format as schema errors. Warnings never fail validation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from fasttrack.manifest.acceptance import benchmark_synthetic, in_target
from fasttrack.manifest.build import resolve_setup, setup_differences
from fasttrack.manifest.model import ENV_OFF_VALUES, PRESERVED_FEATURES, lower_is_better
from fasttrack.manifest.narrowing import narrowed_points
from fasttrack.manifest.placeholders import PLACEHOLDER_RE as _PLACEHOLDER
from fasttrack.manifest.placeholders import PLACEHOLDERS
from fasttrack.manifest.problems import Path, Problem, json_path
from fasttrack.manifest.scope import DIMENSIONS, HARDWARE_DIMENSIONS, PARALLEL_DIMENSIONS

MAX_DRAFT_LENGTH = 16

RESERVED_DIMENSION_NAMES = frozenset({*DIMENSIONS, "port", *PARALLEL_DIMENSIONS.values()})

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


# --- switches -----------------------------------------------------------------------------


def switch_entries(data: Mapping[str, Any]) -> list[tuple[Path, Mapping[str, Any]]]:
    """(path, section) of every switch: the ``switches`` list or the one ``switch``."""
    if isinstance(data.get("switches"), list):
        return [(("switches", i), s) for i, s in enumerate(data["switches"]) if isinstance(s, dict)]
    if isinstance(data.get("switch"), dict):
        return [(("switch",), data["switch"])]
    return []


def env_assignment(text: str | None) -> tuple[str, str] | None:
    if not text or "=" not in text:
        return None
    name, value = text.split("=", 1)
    return name, value


def is_off_value(value: str) -> bool:
    return value.strip().lower() in ENV_OFF_VALUES


def _switch(data: Mapping[str, Any]) -> Iterator[Problem]:
    kind = data["target"]["kind"]
    entries = switch_entries(data)
    for path, switch in entries:
        enable = switch.get("enable") or {}
        if not any(enable.get(k) for k in ("engine_arg", "server_flag", "env")):
            yield _error((*path, "enable"), "say how the switch is turned on: set engine_arg, server_flag or env")
        elif kind == "openai" and not (enable.get("server_flag") or enable.get("env")):
            yield _error(
                (*path, "enable"),
                f"switch {switch['name']!r} is turned on only by engine_arg, which an openai target cannot be "
                "given: set server_flag (the candidate command passes it) or env",
            )
        proof = switch.get("proof")
        if proof:
            if proof["source"] == "metrics" and not (proof.get("metric") and proof.get("label")):
                yield _error(
                    (*path, "proof"),
                    "proof from metrics needs 'metric' (a counter name) and 'label' (the label naming the path)",
                )
            if proof["source"] == "inprocess" and kind != "python":
                yield _error(
                    (*path, "proof", "source"),
                    "proof source 'inprocess' needs target kind 'python'; use 'metrics' for openai targets",
                )
        elif kind == "openai":
            yield _error(
                path,
                f"switch {switch['name']!r} has no proof, and an openai target can only prove which path ran "
                "through a counter: add proof: {source: metrics, metric: <counter>, label: <label naming the path>}",
            )
    yield from _duplicate_switches(entries)
    yield from _switch_keywords_in_options(data, entries)


def _duplicate_switches(entries: list[tuple[Path, Mapping[str, Any]]]) -> Iterator[Problem]:
    """Two switches with one name, flag, engine argument or variable could not be told apart."""
    seen: dict[tuple[str, str], Path] = {}
    for path, switch in entries:
        enable = switch.get("enable") or {}
        env = env_assignment(enable.get("env"))
        keys = [("name", switch.get("name")), ("engine_arg", enable.get("engine_arg"))]
        keys += [("server_flag", enable.get("server_flag")), ("env", env[0] if env else None)]
        for what, value in keys:
            if not value:
                continue
            if (what, value) in seen and seen[(what, value)] != path:
                where = json_path(seen[(what, value)])
                yield _error(
                    (*path, "name" if what == "name" else "enable"),
                    f"{what} {value!r} is also used by the switch at {where}: each switch needs its own",
                )
            seen.setdefault((what, value), path)


def _switch_keywords_in_options(
    data: Mapping[str, Any], entries: list[tuple[Path, Mapping[str, Any]]]
) -> Iterator[Problem]:
    python = data["target"].get("python") or {}
    options = python.get("options") or {}
    for _path, switch in entries:
        enable = switch.get("enable") or {}
        keyword = enable.get("engine_arg") or (None if enable.get("env") else switch.get("name"))
        if isinstance(keyword, str) and keyword in options:
            yield _error(
                ("target", "python", "options", keyword),
                f"target.python.options sets {keyword!r}, the keyword of switch {switch['name']!r}: fasttrack "
                "sets it per side (off for the baseline, on for the candidate); remove it here",
            )


def _switch_points(data: Mapping[str, Any]) -> Iterator[Problem]:
    """A switch's points (where it has an effect) and the ablation's points name scope values."""
    values = _dimension_values(data["scope"])
    owners = [*switch_entries(data)]
    if isinstance(data.get("ablation"), dict):
        owners.append((("ablation",), data["ablation"]))
    deployment = deployment_dimensions(data["scope"])
    for path, owner in owners:
        for dim, chosen in (owner.get("points") or {}).items():
            if dim not in deployment:
                yield _error(
                    (*path, "points", dim),
                    f"points may name deployment dimensions ({', '.join(sorted(deployment))}), not {dim!r}",
                )
                continue
            for j, value in enumerate(chosen):
                yield from _point_in_scope(data["scope"], values, dim, value, (*path, "points", dim, j))


def _synthetic_acceptance(data: Mapping[str, Any]) -> Iterator[Problem]:
    """Forced (synthetic) acceptance where the manifest says it is measured is an error: in the
    target's commands, env or speculative_args against scope.speculative.acceptance; in what a
    benchmark runs with against its setups' or claims' stated acceptance."""
    spec = (data.get("scope") or {}).get("speculative") if isinstance(data.get("scope"), dict) else None
    if isinstance(spec, dict) and spec.get("acceptance", "measured") == "measured":
        for found in in_target(data):
            yield _error(
                found.where,
                f"{found.label()} forces synthetic acceptance, but scope.speculative.acceptance is measured: the "
                "speculative checks and benchmarks would run on forced drafts (accuracy passes when every draft is "
                "accepted blindly); remove it here, or declare acceptance: synthetic",
            )
    for index, bench in enumerate(data.get("benchmarks") or ()):
        if not isinstance(bench, dict):
            continue
        forced = benchmark_synthetic(data, bench)
        if not forced:
            continue
        text = "; ".join(f.label() for f in forced)
        for side, setup in (bench.get("setups") or {}).items():
            if ((setup or {}).get("speculative") or {}).get("acceptance") in ("measured", "none"):
                yield _error(
                    ("benchmarks", index, "setups", side, "speculative", "acceptance"),
                    f"this benchmark runs with synthetic acceptance ({text}), not "
                    f"{setup['speculative']['acceptance']!r}: say acceptance: synthetic",
                )
        for j, claim in enumerate(bench.get("claims") or ()):
            said = (claim.get("conditions") or {}).get("acceptance")
            if said in ("measured", "none"):
                yield _error(
                    ("benchmarks", index, "claims", j, "conditions", "acceptance"),
                    f"claim {claim.get('id')!r} says acceptance {said!r}, but its benchmark runs with synthetic "
                    f"acceptance ({text})",
                )


def _gated_paths(data: Mapping[str, Any]) -> Iterator[Problem]:
    """Shared files edited behind the switches are only acceptable with the stock path proven
    unchanged: gated_paths needs a required stock_unchanged check."""
    if not data["model"].get("gated_paths"):
        return
    check = data.get("stock_unchanged")
    if not isinstance(check, dict):
        yield _error(
            ("model", "gated_paths"),
            "gated_paths lets the change edit shared files behind its switches, which needs the stock path proven "
            "unchanged: add a stock_unchanged section (e.g. stock_unchanged: {prompts: 4})",
        )
    elif check.get("required") is False:
        yield _error(
            ("stock_unchanged", "required"), "with model.gated_paths the stock_unchanged check must be required"
        )


def _ablation(data: Mapping[str, Any]) -> Iterator[Problem]:
    ablation = data.get("ablation")
    if ablation is None:
        return
    names = [s.get("name") for _p, s in switch_entries(data)]
    if len(names) < 2:
        yield _error(
            ("ablation",),
            "ablation needs at least two switches (switches: [...]): with one switch, that switch alone is all on",
        )
    for key, section, what in (("benchmarks", "benchmarks", "benchmark"), ("evals", "evals", "eval")):
        known = [str(item.get("id")) for item in data.get(section) or () if isinstance(item, dict)]
        for j, ident in enumerate(ablation.get(key) or ()):
            if ident not in known:
                yield _error(
                    ("ablation", key, j), f"{what} {ident!r} is not declared (declared: {', '.join(known) or 'none'})"
                )
    if ablation.get("benchmarks") is None and not data.get("benchmarks") and not ablation.get("evals"):
        yield _error(
            ("ablation",), "ablation has nothing to run: the manifest declares no benchmarks and lists no evals"
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


def engine_dimensions(scope: Mapping[str, Any]) -> dict[str, list[Any]]:
    """scope.engine plus decode-context / expert parallelism listing a degree above 1 (as
    `fasttrack.manifest.model.Scope.engine_values`)."""
    values = {
        name: list(v)
        for name, v in (scope.get("engine") or {}).items()
        if isinstance(v, list) and name not in RESERVED_DIMENSION_NAMES  # reported by _engine_scope
    }
    par = scope.get("parallelism") or {}
    for key, name in PARALLEL_DIMENSIONS.items():
        degrees = par.get(key) or []
        if any(isinstance(d, int) and d > 1 for d in degrees):
            values[name] = list(degrees)
    return values


def deployment_dimensions(scope: Mapping[str, Any]) -> set[str]:
    return {*HARDWARE_DIMENSIONS, *engine_dimensions(scope)}


def _present_dimensions(scope: Mapping[str, Any]) -> set[str]:
    present = {"accelerator", "device_count", "tensor_parallel", *engine_dimensions(scope)}
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
    for name, chosen in engine_dimensions(scope).items():
        values[name] = set(chosen)
    return values


def _engine_scope(data: Mapping[str, Any]) -> Iterator[Problem]:
    scope = data["scope"]
    for name in scope.get("engine") or {}:
        if name in RESERVED_DIMENSION_NAMES:
            where = {
                "decode_context_parallel": "scope.parallelism.decode_context",
                "expert_parallel": "scope.parallelism.expert",
            }
            yield _error(
                ("scope", "engine", name),
                f"{name!r} is not an engine dimension name: it is "
                + (f"declared in {where[name]}" if name in where else "a built-in scope dimension or placeholder"),
            )
    for index, entry in enumerate(scope["hardware"]):
        if entry.get("compute_capability") and entry["accelerator"].strip().lower() == "cpu":
            yield _error(
                ("scope", "hardware", index, "compute_capability"), "a cpu entry has no CUDA compute capability"
            )


# --- target -------------------------------------------------------------------------------


def _target(data: Mapping[str, Any]) -> Iterator[Problem]:
    target = data["target"]
    openai = target.get("openai")
    if target["kind"] != "openai" or not openai:
        return
    switches = [s for _p, s in switch_entries(data)]
    flags = [(s["name"], (s.get("enable") or {}).get("server_flag")) for s in switches]
    engine = engine_dimensions(data["scope"]) if isinstance(data.get("scope"), dict) else {}
    known = (*PLACEHOLDERS, *engine)
    for side in ("baseline", "candidate"):
        conf = openai[side]
        path = ("target", "openai", side)
        command, url = conf.get("command"), conf.get("url")
        if bool(command) == bool(url):
            yield _error(
                path, "give exactly one of 'command' (fasttrack starts the server) or 'url' (a running server)"
            )
            continue
        yield from _env_switches(switches, side, conf, path)
        varying = [name for name, values in engine.items() if len(values) > 1]
        if url and varying:
            yield _error(
                path,
                f"the scope's engine dimension(s) {', '.join(varying)} take several values, which a running server at "
                "a url cannot switch between: give a command using their placeholders, or one value each",
            )
        if command:
            extra = [str(w) for w in openai.get("speculative_args") or ()]
            words = [*command, *(str(v) for v in (conf.get("env") or {}).values()), *extra]
            for arg in words:
                for name in _PLACEHOLDER.findall(arg):
                    if name not in known:
                        yield _error(
                            (*path, "command"),
                            f"unknown placeholder {{{name}}} in {arg!r}; known: {', '.join('{' + p + '}' for p in known)}",
                        )
            used = {name for arg in words for name in _PLACEHOLDER.findall(arg)}
            for name in varying:
                if name not in used:
                    yield _error(
                        (*path, "command"),
                        f"scope engine dimension {name!r} takes {len(engine[name])} values but the {side} command "
                        f"never uses {{{name}}}: every value would start the same server",
                    )
            if not any("{port}" in arg for arg in command):
                yield _error((*path, "command"), "the command must contain '{port}' so fasttrack can pick a free port")
            for name, flag in flags:
                if flag and side == "candidate" and flag not in command:
                    yield _error(
                        (*path, "command"),
                        f"the candidate command does not turn the switch on: it lacks {flag} (switch {name!r})",
                    )
                if flag and side == "baseline" and flag in command:
                    yield _error(
                        (*path, "command"),
                        f"the baseline command turns the switch on ({flag}); the baseline is the stock path",
                    )


def _env_switches(
    switches: list[Mapping[str, Any]], side: str, conf: Mapping[str, Any], path: Path
) -> Iterator[Problem]:
    """An environment switch is on in the candidate's environment (fasttrack sets it) and absent or
    off in the baseline's: in ``env`` and in ``NAME=value`` words of the command (``env NAME=1 ...``)."""
    env = conf.get("env") or {}
    words = [w for w in conf.get("command") or () if isinstance(w, str)]
    for switch in switches:
        assignment = env_assignment((switch.get("enable") or {}).get("env"))
        if assignment is None:
            continue
        name, on = assignment
        set_to: list[tuple[Path, str]] = []
        if name in env:
            set_to.append(((*path, "env", name), str(env[name])))
        set_to += [((*path, "command"), w.split("=", 1)[1]) for w in words if w.startswith(name + "=")]
        for where, value in set_to:
            if side == "baseline" and not is_off_value(value):
                yield _error(
                    where,
                    f"the baseline sets {name}={value}, which turns the switch {switch['name']!r} on; the baseline "
                    "is the stock path: leave it out (fasttrack removes it) or set it off (0, false, off)",
                )
            if side == "candidate" and value != on:
                yield _error(
                    where,
                    f"the candidate sets {name}={value}, but the switch {switch['name']!r} is on with {name}={on}: "
                    "leave it out (fasttrack sets it for the candidate)",
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
                    f"covers dimension {dim!r}, which the scope does not declare (declared: {', '.join(sorted(present))})",
                )


def _evals(data: Mapping[str, Any]) -> Iterator[Problem]:
    evals = data.get("evals") or []
    yield from _duplicates(evals, ("evals",), "eval")
    for index, ev in enumerate(evals):
        path = ("evals", index)
        bins = ev.get("bins")
        if bins:
            yield from _increasing(bins["edges"], (*path, "bins", "edges"), "bin edges")
        if ev.get("min_score") is not None and ev.get("higher_is_better") is False:
            yield _error((*path, "min_score"), "min_score is a floor for a metric where higher is better")
        if ev.get("fewshot_as_multiturn") and not ev.get("apply_chat_template"):
            yield _error(
                (*path, "fewshot_as_multiturn"), "fewshot_as_multiturn needs apply_chat_template: true (as lm-eval's)"
            )
        for key in ("max_length", "tokenized_requests", "tokenizer_backend"):
            if key in (ev.get("model_args") or {}):
                yield _warning(
                    (*path, "model_args", key),
                    f"model_args.{key} configures lm-eval's own client and has no effect here: fasttrack sends each "
                    "side's requests to the target itself",
                )
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
    name only deployment values (hardware and engine) the scope declares."""
    values = _dimension_values(data["scope"])
    deployment = deployment_dimensions(data["scope"])
    for path, _label, points in narrowed_points(data):
        for dim, chosen in points.items():
            if dim not in deployment:
                yield _error(
                    (*path, dim),
                    f"points may name deployment dimensions ({', '.join(sorted(deployment))}), not {dim!r}",
                )
                continue
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
        yield from _vllm_bench(data, bench, path)
        for metric, bounds in (bench.get("assertions") or {}).items():
            if bounds.get("min") is not None and bounds.get("max") is not None and bounds["min"] > bounds["max"]:
                yield _error((*path, "assertions", metric), f"min {bounds['min']} is greater than max {bounds['max']}")
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
    values, present = _dimension_values(data["scope"]), _present_dimensions(data["scope"])
    for switch_path, switch in switch_entries(data):
        proof = switch.get("proof") or {}
        census = proof.get("census")
        rules = [census] if isinstance(census, Mapping) else list(census or ())
        for j, rule in enumerate(rules):
            path: Path = (*switch_path, "proof", "census")
            if not isinstance(census, Mapping):
                path = (*path, j)
            yield from _region_problems(data["scope"], values, present, rule.get("points") or {}, path)
            for k, pattern in enumerate(rule.get("kernels_present") or ()):
                try:
                    re.compile(pattern)
                except re.error as err:
                    yield _error((*path, "kernels_present", k), f"not a regular expression: {err}")


VLLM_BENCH_RESERVED = frozenset(
    {
        "backend",
        "base-url",
        "host",
        "port",
        "model",
        "dataset-name",
        "num-prompts",
        "max-concurrency",
        "random-input-len",
        "random-output-len",
        "input-len",
        "output-len",
        "save-result",
        "result-dir",
        "result-filename",
        "ignore-eos",
    }
)
VLLM_FIELD = re.compile(
    r"^((mean|median|std|p[0-9]+(\.[0-9]+)?)_(ttft|tpot|itl|e2el)_ms|request_throughput|request_goodput"
    r"|output_throughput|total_token_throughput|max_output_tokens_per_s)$"
)


def _vllm_bench(data: Mapping[str, Any], bench: Mapping[str, Any], path: Path) -> Iterator[Problem]:
    """A vllm_bench workload as perf-eval's parse_workload checks one, plus what fasttrack needs."""
    workload = bench.get("workload") or {}
    is_bench = workload.get("kind") == "vllm_bench"
    if not is_bench:
        if VLLM_FIELD.match(str(bench.get("metric"))):
            yield _error(
                (*path, "metric"),
                f"metric {bench['metric']!r} is a field of vllm bench serve's result: use workload.kind vllm_bench",
            )
        return
    wpath = (*path, "workload")
    target = data.get("target")
    if isinstance(target, dict) and target.get("kind") != "openai":
        yield _error(
            (*wpath, "kind"),
            "a vllm_bench workload runs `vllm bench serve` against servers: it needs target.kind openai",
        )
    if not VLLM_FIELD.match(str(bench.get("metric"))):
        yield _error(
            (*path, "metric"),
            f"a vllm_bench benchmark compares a field of vLLM's result JSON (median_tpot_ms, output_throughput ...), not {bench.get('metric')!r}",
        )
    for key in ("input_len", "output_len", "num_prompts"):
        if key not in workload:
            yield _error(wpath, f"a vllm_bench workload needs {key}")
    reps = workload.get("repetitions", 1)
    if isinstance(reps, int) and reps % 2 == 0:
        yield _error((*wpath, "repetitions"), f"repetitions must be odd (the median of {reps} runs is no run's value)")
    seen: set[str] = set()
    for name in workload.get("args") or {}:
        flag = str(name).lstrip("-").replace("_", "-")
        if flag in VLLM_BENCH_RESERVED:
            yield _error((*wpath, "args", name), f"args cannot set --{flag}: fasttrack sets it for each run")
        elif flag in seen:
            yield _error((*wpath, "args", name), f"args gives --{flag} twice")
        seen.add(flag)


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
        diffs = [
            f"{k} ({setups['baseline'].get(k)!r} vs {setups['candidate'].get(k)!r})"
            for k in setup_differences(setups["baseline"], setups["candidate"])
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
        lower_better = not bench.get("higher_is_better", not lower_is_better(bench["metric"]))
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
    (_switch, ("target",), ("switch", "switches")),
    (_switch_points, ("scope",), ("switch", "switches", "ablation")),
    (_ablation, (), ("ablation", "switch", "switches", "benchmarks", "evals")),
    (_gated_paths, ("model",), ("stock_unchanged",)),
    (_synthetic_acceptance, ("target",), ("scope", "benchmarks")),
    (_scope, ("scope",), ()),
    (_engine_scope, ("scope",), ()),
    (_target, ("target",), ("switch", "switches", "scope")),
    (_kernel_tests, ("scope",), ("kernel_tests",)),
    (_evals, (), ("evals",)),
    (_divergence, (), ("divergence", "evals")),
    (_narrowed_checks, ("scope",), ("evals", "divergence", "features", "stock_unchanged")),
    (_features, ("preserve",), ("features",)),
    (_benchmarks, ("scope",), ("benchmarks",)),
    (_census_rules, ("scope",), ("switch", "switches")),
    (_audits, ("scope",), ("audits",)),
)
