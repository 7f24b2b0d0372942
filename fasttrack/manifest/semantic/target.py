"""Rules of the target: its kind's section, environment switches, and what forces synthetic
speculative acceptance."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from fasttrack.manifest.acceptance import benchmark_synthetic, in_target
from fasttrack.manifest.placeholders import PLACEHOLDER_RE as _PLACEHOLDER
from fasttrack.manifest.placeholders import PLACEHOLDERS
from fasttrack.manifest.problems import Path, Problem
from fasttrack.manifest.semantic.common import (
    engine_dimensions,
    env_assignment,
    error,
    is_off_value,
    single_value_unused,
    single_valued_engine,
    switch_entries,
    warning,
)


def target(data: Mapping[str, Any]) -> Iterator[Problem]:
    target = data["target"]
    if target["kind"] == "vllm":
        from fasttrack.manifest.semantic.vllm_target import vllm_target

        yield from vllm_target(data, _env_switches)
        return
    if target["kind"] == "sglang":
        from fasttrack.manifest.semantic.sglang_target import sglang_target

        yield from sglang_target(data, _env_switches)
        return
    openai = target.get("openai")
    if target["kind"] != "openai" or not openai:
        return
    switches = [s for _p, s in switch_entries(data)]
    flags = [(s["name"], (s.get("enable") or {}).get("server_flag")) for s in switches]
    engine = engine_dimensions(data["scope"]) if isinstance(data.get("scope"), dict) else {}
    known = (*PLACEHOLDERS, *engine)
    yield from _unused_single_values(openai, single_valued_engine(data.get("scope")))
    for side in ("baseline", "candidate"):
        conf = openai[side]
        path = ("target", "openai", side)
        command, url = conf.get("command"), conf.get("url")
        if bool(command) == bool(url):
            yield error(path, "give exactly one of 'command' (fasttrack starts the server) or 'url' (a running server)")
            continue
        yield from _env_switches(switches, side, conf, path)
        varying = [name for name, values in engine.items() if len(values) > 1]
        if url and varying:
            yield error(
                path,
                f"the scope's engine dimension(s) {', '.join(varying)} take several values, which a running server at "
                "a url cannot switch between: give a command using their placeholders, or one value each",
            )
        if command:
            extra = [str(w) for w in openai.get("speculative_args") or ()]
            extra += [str(v) for v in (openai.get("speculative_env") or {}).values()]
            words = [*command, *(str(v) for v in (conf.get("env") or {}).values()), *extra]
            for arg in words:
                for name in _PLACEHOLDER.findall(arg):
                    if name not in known:
                        yield error(
                            (*path, "command"),
                            f"unknown placeholder {{{name}}} in {arg!r}; known: {', '.join('{' + p + '}' for p in known)}",
                        )
            used = {name for arg in words for name in _PLACEHOLDER.findall(arg)}
            for name in varying:
                if name not in used:
                    yield error(
                        (*path, "command"),
                        f"scope engine dimension {name!r} takes {len(engine[name])} values but the {side} command "
                        f"never uses {{{name}}}: every value would start the same server",
                    )
            if not any("{port}" in arg for arg in command):
                yield error((*path, "command"), "the command must contain '{port}' so fasttrack can pick a free port")
            for name, flag in flags:
                if flag and side == "candidate" and flag not in command:
                    yield error(
                        (*path, "command"),
                        f"the candidate command does not turn the switch on: it lacks {flag} (switch {name!r})",
                    )
                if flag and side == "baseline" and flag in command:
                    yield error(
                        (*path, "command"),
                        f"the baseline command turns the switch on ({flag}); the baseline is the stock path",
                    )


def _unused_single_values(openai: Mapping[str, Any], single: Mapping[str, Any]) -> Iterator[Problem]:
    """A single-valued engine dimension neither command uses: the servers are never told it, yet
    every point (and the evidence) says the check ran at that value. A server at a url is exempt:
    its one value is the running server's own setting."""
    sides = [openai.get(side) or {} for side in ("baseline", "candidate")]
    commands: list[Any] = [conf["command"] for conf in sides if conf.get("command")]
    if not commands:
        return
    words = [str(w) for command in commands for w in command]
    words += [str(v) for conf in sides for v in (conf.get("env") or {}).values()]
    words += [str(w) for w in openai.get("speculative_args") or ()]
    words += [str(v) for v in (openai.get("speculative_env") or {}).values()]
    used = {name for word in words for name in _PLACEHOLDER.findall(word)}
    for name, value in single.items():
        if name not in used:
            yield warning(
                ("scope", "engine", name), single_value_unused(name, value, "neither command uses", "the commands")
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
                yield error(
                    where,
                    f"the baseline sets {name}={value}, which turns the switch {switch['name']!r} on; the baseline "
                    "is the stock path: leave it out (fasttrack removes it) or set it off (0, false, off)",
                )
            if side == "candidate" and value != on:
                yield error(
                    where,
                    f"the candidate sets {name}={value}, but the switch {switch['name']!r} is on with {name}={on}: "
                    "leave it out (fasttrack sets it for the candidate)",
                )


def synthetic_acceptance(data: Mapping[str, Any]) -> Iterator[Problem]:
    """Forced (synthetic) acceptance where the manifest says it is measured is an error: in the
    target's commands, env or speculative_args against scope.speculative.acceptance; in what a
    benchmark runs with against its setups' or claims' stated acceptance."""
    spec = (data.get("scope") or {}).get("speculative") if isinstance(data.get("scope"), dict) else None
    if isinstance(spec, dict) and spec.get("acceptance", "measured") == "measured":
        for found in in_target(data):
            yield error(
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
                yield error(
                    ("benchmarks", index, "setups", side, "speculative", "acceptance"),
                    f"this benchmark runs with synthetic acceptance ({text}), not "
                    f"{setup['speculative']['acceptance']!r}: say acceptance: synthetic",
                )
        for j, claim in enumerate(bench.get("claims") or ()):
            said = (claim.get("conditions") or {}).get("acceptance")
            if said in ("measured", "none"):
                yield error(
                    ("benchmarks", index, "claims", j, "conditions", "acceptance"),
                    f"claim {claim.get('id')!r} says acceptance {said!r}, but its benchmark runs with synthetic "
                    f"acceptance ({text})",
                )


def dependencies(data: Mapping[str, Any]) -> Iterator[Problem]:
    """``target.dependencies``: one entry per name; a ``version`` that is a PEP 440 specifier."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    seen: set[str] = set()
    for index, dep in enumerate(data["target"].get("dependencies") or ()):
        path = ("target", "dependencies", index)
        key = canonical_name(dep["name"])
        if key in seen:
            yield error((*path, "name"), f"dependency {dep['name']!r} is listed twice")
        seen.add(key)
        if dep.get("version") is not None:
            try:
                SpecifierSet(dep["version"])
            except InvalidSpecifier:
                yield error(
                    (*path, "version"),
                    f"{dep['version']!r} is not a version specifier (PEP 440: '>=0.3', '==0.3.1', '>=0.3,<0.4')",
                )


def canonical_name(name: str) -> str:
    """A distribution name as pip compares them: flashinfer_python = FlashInfer-Python."""
    return re.sub(r"[-_.]+", "-", name).lower()
