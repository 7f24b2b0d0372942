"""Rules of the switches: names and their engine or server flags, where each acts (points), the
ablation arms, gated shared paths, the census proof's rules."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from fasttrack.manifest.problems import Path, Problem, json_path
from fasttrack.manifest.sections import SERVER_KINDS
from fasttrack.manifest.semantic.common import (
    deployment_dimensions,
    dimension_values,
    duplicates,
    env_assignment,
    error,
    point_in_scope,
    present_dimensions,
    region_problems,
    switch_entries,
)


def switch(data: Mapping[str, Any]) -> Iterator[Problem]:
    kind = data["target"]["kind"]
    entries = switch_entries(data)
    for path, switch in entries:
        enable = switch.get("enable") or {}
        if not any(enable.get(k) for k in ("engine_arg", "server_flag", "env", "option")):
            yield error(
                (*path, "enable"), "say how the switch is turned on: set engine_arg, server_flag, env or option"
            )
        elif kind in SERVER_KINDS and not any(enable.get(k) for k in ("server_flag", "env", "option")):
            yield error(
                (*path, "enable"),
                f"switch {switch['name']!r} is turned on only by engine_arg, which {_a(kind)} target cannot be "
                "given: set server_flag (the candidate command passes it) or env",
            )
        yield from _one_assignment(enable.get("env"), (*path, "enable", "env"))
        proof = switch.get("proof")
        if proof:
            if proof["source"] == "metrics" and not (proof.get("metric") and proof.get("label")):
                yield error(
                    (*path, "proof"),
                    "proof from metrics needs 'metric' (a counter name) and 'label' (the label naming the path)",
                )
            if proof.get("log_signature"):
                yield from _log_signature(proof["log_signature"], (*path, "proof", "log_signature"), kind)
            if proof["source"] == "inprocess" and kind != "python":
                yield error(
                    (*path, "proof", "source"),
                    "proof source 'inprocess' needs target kind 'python'; use 'metrics', 'log' or 'census' for server "
                    "targets (openai, vllm, sglang)",
                )
            yield from _counterless(proof, (*path, "proof"), kind)
        elif kind in SERVER_KINDS:
            yield error(
                path,
                f"switch {switch['name']!r} has no proof, and {_a(kind)} target proves which path ran only through "
                "a counter (proof: {source: metrics, metric: <counter>, label: <label naming the path>}), its log "
                "({source: log, log_signature: <regex>}) or a kernel census ({source: census})",
            )
    yield from _duplicate_switches(entries)
    yield from _switch_keywords_in_options(data, entries)


def _counterless(proof: Mapping[str, Any], path: Path, kind: str) -> Iterator[Problem]:
    """A proof without a counter: from the server's log, or from its kernel census."""
    source = proof["source"]
    if source not in ("log", "census"):
        return
    if kind not in SERVER_KINDS:
        yield error(
            (*path, "source"),
            f"proof source {source!r} needs a server target (openai, vllm, sglang); an in-process target proves its path "
            "with source: inprocess",
        )
    if source == "log" and not proof.get("log_signature"):
        yield error(path, "proof from the server's log needs 'log_signature' (a regex the candidate's log must show)")
    if source == "census" and not proof.get("census"):
        yield error(
            path,
            "proof from the kernel census needs 'census' rules (kernels_present, kernels_absent, "
            "max_kernels_per_layer_ratio or min_streams_per_step): a census that merely differs from stock's proves no particular path",
        )
    for key in ("metric", "label"):
        if proof.get(key):
            yield error(
                (*path, key), f"a proof from the {source} reads no counter: drop {key!r} or use source: metrics"
            )


# A second NAME= after whitespace in an assignment's value: "A=1 B=2" read as A set to "1 B=2".
_SECOND_ASSIGNMENT = re.compile(r"\s([A-Za-z_][A-Za-z0-9_]*)=")


def _one_assignment(text: Any, path: Path) -> Iterator[Problem]:
    """``enable.env`` is one assignment, NAME=value; a value holding another NAME= is two variables
    written as one (the first would be set to the whole rest), almost surely a mistake."""
    assignment = env_assignment(text) if isinstance(text, str) else None
    second = _SECOND_ASSIGNMENT.search(assignment[1]) if assignment else None
    if assignment and second:
        name, value = assignment
        yield error(
            path,
            f"{text!r} sets one variable, {name}, to {value!r}: enable.env is a single NAME=value; for a "
            f"second variable ({second.group(1)}) declare a switch of its own",
        )


def _log_signature(pattern: str, path: Path, kind: str) -> Iterator[Problem]:
    if kind == "python":
        yield error(path, "a log signature needs a server target (the server's log is what is searched)")
    try:
        re.compile(pattern)
    except re.error as err:
        yield error(path, f"not a regular expression: {err}")


def _a(kind: str) -> str:
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


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
                yield error(
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
        keyword = enable.get("engine_arg") or (
            None if enable.get("env") or enable.get("option") else switch.get("name")
        )
        if isinstance(keyword, str) and keyword in options:
            yield error(
                ("target", "python", "options", keyword),
                f"target.python.options sets {keyword!r}, the keyword of switch {switch['name']!r}: fasttrack "
                "sets it per side (off for the baseline, on for the candidate); remove it here",
            )


def switch_points(data: Mapping[str, Any]) -> Iterator[Problem]:
    """A switch's points (where it has an effect), its negative scope (inert, threshold, refused)
    and the ablation's points name scope values."""
    values = dimension_values(data["scope"])
    owners = [*switch_entries(data)]
    if isinstance(data.get("ablation"), dict):
        owners.append((("ablation",), data["ablation"]))
    deployment = deployment_dimensions(data["scope"])
    present = present_dimensions(data["scope"])
    # (where, region, the dimensions it may name): a switch's points and inert regions may name
    # workload dimensions too (tokens_per_step); the ablation's and a refused combination's name servers
    regions: list[tuple[Path, Mapping[str, Any], set[str]]] = []
    for path, owner in owners:
        own = present if path[0] != "ablation" else deployment
        regions += [((*path, "points"), owner.get("points") or {}, own)]
        regions += [((*path, "inert"), owner.get("inert") or {}, own)]
        regions += [
            ((*path, "refused", j, "points"), r.get("points") or {}, deployment)
            for j, r in enumerate(owner.get("refused") or ())
        ]
        if owner.get("inert") and _overlap(owner.get("points") or {}, owner["inert"]):
            yield error(
                (*path, "inert"),
                "inert and points meet: a deployment cannot be both where the switch acts and where it must not",
            )
        yield from _refused(data, owner, path)
        yield from _threshold(data, owner, path, present)
    for where, region, allowed in regions:
        for dim, chosen in region.items():
            if dim not in allowed:
                what = "deployment dimensions" if allowed is deployment else "scope dimensions"
                yield error((*where, dim), f"{where[-1]} may name {what} ({', '.join(sorted(allowed))}), not {dim!r}")
                continue
            for j, value in enumerate(chosen):
                yield from point_in_scope(data["scope"], values, dim, value, (*where, dim, j))


def _refused(data: Mapping[str, Any], owner: Mapping[str, Any], path: Path) -> Iterator[Problem]:
    """Refused combinations: unique ids, a message that compiles, a server target to refuse them."""
    yield from duplicates(owner.get("refused") or (), (*path, "refused"), "refused combination")
    target = data.get("target") if isinstance(data.get("target"), Mapping) else None
    if owner.get("refused") and target is not None and target.get("kind") not in SERVER_KINDS:
        yield error(
            (*path, "refused"),
            "a refused combination is a server that must not start: it needs target.kind openai or vllm",
        )
    for j, refused in enumerate(owner.get("refused") or ()):
        try:
            re.compile(refused["message"])
        except re.error as err:
            yield error((*path, "refused", j, "message"), f"message is not a regular expression: {err}")


def _threshold(data: Mapping[str, Any], owner: Mapping[str, Any], path: Path, present: set[str]) -> Iterator[Problem]:
    """A threshold is a value of a declared dimension with scope values on both sides of it (else
    either the switch is never judged where it acts or never where it must fall back)."""
    threshold = owner.get("threshold")
    if not isinstance(threshold, Mapping):
        return
    dim, top = threshold["dimension"], threshold["max"]
    if dim not in present:
        yield error((*path, "threshold", "dimension"), f"threshold dimension {dim!r} is not declared in the scope")
        return
    values = dimension_values(data["scope"]).get(dim) or set()
    if dim == "batch":
        batch = data["scope"]["batch"]
        values = set(batch.get("points") or ()) | {batch["min"], batch["max"]}
    if not any(v <= top for v in values) or not any(v > top for v in values):
        yield error(
            (*path, "threshold", "max"),
            f"the scope's {dim} values ({', '.join(map(str, sorted(values)))}) do not lie on both sides of "
            f"{top}: declare a value at or below it and one above it, so both sides are checked",
        )


def _overlap(points: Mapping[str, Any], inert: Mapping[str, Any]) -> bool:
    """Whether some point lies in both regions (a dimension only one names constrains nothing)."""
    return all(set(points[d]) & set(inert[d]) for d in set(points) & set(inert))


def gated_paths(data: Mapping[str, Any]) -> Iterator[Problem]:
    """Shared files edited behind the switches are only acceptable with the stock path proven
    unchanged: gated_paths needs a required stock_unchanged check."""
    if not data["model"].get("gated_paths"):
        return
    check = data.get("stock_unchanged")
    if not isinstance(check, dict):
        yield error(
            ("model", "gated_paths"),
            "gated_paths lets the change edit shared files behind its switches, which needs the stock path proven "
            "unchanged: add a stock_unchanged section (e.g. stock_unchanged: {prompts: 4})",
        )
    elif check.get("required") is False:
        yield error(
            ("stock_unchanged", "required"), "with model.gated_paths the stock_unchanged check must be required"
        )


def ablation(data: Mapping[str, Any]) -> Iterator[Problem]:
    ablation = data.get("ablation")
    if ablation is None:
        return
    names = [s.get("name") for _p, s in switch_entries(data)]
    if len(names) < 2:
        yield error(
            ("ablation",),
            "ablation needs at least two switches (switches: [...]): with one switch, that switch alone is all on",
        )
    for key, section, what in (("benchmarks", "benchmarks", "benchmark"), ("evals", "evals", "eval")):
        known = [str(item.get("id")) for item in data.get(section) or () if isinstance(item, dict)]
        for j, ident in enumerate(ablation.get(key) or ()):
            if ident not in known:
                yield error(
                    ("ablation", key, j), f"{what} {ident!r} is not declared (declared: {', '.join(known) or 'none'})"
                )
    if ablation.get("benchmarks") is None and not data.get("benchmarks") and not ablation.get("evals"):
        yield error(
            ("ablation",), "ablation has nothing to run: the manifest declares no benchmarks and lists no evals"
        )


def census_rules(data: Mapping[str, Any]) -> Iterator[Problem]:
    values, present = dimension_values(data["scope"]), present_dimensions(data["scope"])
    for switch_path, switch in switch_entries(data):
        proof = switch.get("proof") or {}
        census = proof.get("census")
        rules = [census] if isinstance(census, Mapping) else list(census or ())
        for j, rule in enumerate(rules):
            path: Path = (*switch_path, "proof", "census")
            if not isinstance(census, Mapping):
                path = (*path, j)
            yield from region_problems(data["scope"], values, present, rule.get("points") or {}, path)
            yield from _streams_need_a_gpu_server(data, rule, path)
            for key in ("kernels_present", "kernels_absent"):
                for k, pattern in enumerate(rule.get(key) or ()):
                    try:
                        re.compile(pattern)
                    except re.error as err:
                        yield error((*path, key, k), f"not a regular expression: {err}")


def _streams_need_a_gpu_server(data: Mapping[str, Any], rule: Mapping[str, Any], path: Path) -> Iterator[Problem]:
    """CUDA streams are seen only in a GPU server's profiler trace: a stream rule over a CPU point
    or on an in-process target could never be shown, and would only ever fail."""
    if rule.get("min_streams_per_step") is None:
        return
    where = (*path, "min_streams_per_step")
    if (data.get("target") or {}).get("kind") not in SERVER_KINDS:
        yield error(where, "CUDA streams come from a server's torch profiler trace; an in-process census has none")
        return
    chosen = (rule.get("points") or {}).get("accelerator")
    cpu = [h for h in data["scope"].get("hardware") or () if h.get("accelerator") == "cpu"]
    if cpu and (chosen is None or "cpu" in chosen):
        yield error(
            where,
            "a CPU point's trace has no CUDA streams: limit this rule to GPU hardware with points: {accelerator: [...]}",
        )
