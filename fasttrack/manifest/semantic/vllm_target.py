"""Rules of a ``target.vllm`` section: the flags fasttrack sets itself, the environment switches
per side (as for openai targets), placeholders, and the draft length's place."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fasttrack.manifest.placeholders import PLACEHOLDER_RE, PLACEHOLDERS
from fasttrack.manifest.problems import Problem
from fasttrack.manifest.semantic.common import (
    engine_dimensions,
    error,
    single_value_unused,
    single_valued_engine,
    switch_entries,
    warning,
)

# Flags fasttrack passes itself: the model, its served name and the port it picked.
OWN_FLAGS = ("--model", "--served-model-name", "--port", "--host")


def vllm_target(data: Mapping[str, Any], env_switches: Any) -> Iterator[Problem]:
    vllm = data["target"].get("vllm")
    if data["target"]["kind"] != "vllm" or not isinstance(vllm, Mapping):
        return
    switches = [s for _p, s in switch_entries(data)]
    engine = engine_dimensions(data["scope"]) if isinstance(data.get("scope"), dict) else {}
    known = (*PLACEHOLDERS, *engine)
    for where, conf in (((), vllm), *(((side,), vllm.get(side) or {}) for side in ("baseline", "candidate"))):
        path = ("target", "vllm", *where)
        for index, arg in enumerate(conf.get("serve_args") or ()):
            flag = str(arg).split("=", 1)[0]
            if flag in OWN_FLAGS:
                yield error(
                    (*path, "serve_args", index),
                    f"{flag} is set by fasttrack (model, served_model_name, its own free port): leave it out of serve_args",
                )
        words = [str(a) for a in conf.get("serve_args") or ()] + [str(v) for v in (conf.get("env") or {}).values()]
        for word in words:
            for name in PLACEHOLDER_RE.findall(word):
                if name not in known or name == "port":
                    yield error(path, f"unknown placeholder {{{name}}} in {word!r}; known: {', '.join(known)}")
    for side in ("baseline", "candidate"):
        own = vllm.get(side) or {}
        merged = {"env": {**(vllm.get("env") or {}), **(own.get("env") or {})}, "command": []}
        yield from env_switches(switches, side, merged, ("target", "vllm", side))
        flags: list[tuple[str, str | None]] = [
            (str(s["name"]), (s.get("enable") or {}).get("server_flag")) for s in switches
        ]
        args = [*(vllm.get("serve_args") or ()), *(own.get("serve_args") or ())]
        for switch_name, server_flag in flags:
            if server_flag and side == "candidate" and server_flag not in args:
                yield error(
                    ("target", "vllm", side, "serve_args"),
                    f"the candidate's serve_args do not turn the switch on: they lack {server_flag} (switch {switch_name!r})",
                )
            if server_flag and side == "baseline" and server_flag in args:
                yield error(
                    ("target", "vllm", "serve_args"),
                    f"the baseline's serve_args turn the switch on ({server_flag}): put it in candidate.serve_args",
                )
    yield from _speculative(data, vllm)
    yield from _varying(vllm, engine, data.get("scope"))


def _varying(vllm: Mapping[str, Any], engine: Mapping[str, list[Any]], scope: Any) -> Iterator[Problem]:
    """A dimension with several values must change how the servers start: the checkpoints through
    ``model: "{model}"``, an engine dimension through a placeholder (data parallelism: fasttrack
    adds ``--data-parallel-size {data_parallel}``)."""
    model = str(vllm.get("model"))
    for name in PLACEHOLDER_RE.findall(model):
        if name not in engine or name == "port":
            yield error(("target", "vllm", "model"), f"unknown placeholder {{{name}}} in {model!r}")
    if "{model}" in model and not vllm.get("served_model_name"):
        yield error(
            ("target", "vllm", "model"),
            "several checkpoints are served under one name the requests use: give served_model_name",
        )
    sides = [vllm, vllm.get("baseline") or {}, vllm.get("candidate") or {}]
    words = [model, *(str(a) for conf in sides for a in (conf.get("serve_args") or ()))]
    words += [str(v) for conf in sides for v in (conf.get("env") or {}).values()]
    used = {name for word in words for name in PLACEHOLDER_RE.findall(word)} | {"data_parallel"}
    for name, value in single_valued_engine(scope).items():
        if name not in used:
            yield warning(
                ("scope", "engine", name),
                single_value_unused(name, value, "the servers never use", "serve_args or env"),
            )
    for name, values in engine.items():
        if len(values) > 1 and name not in used:
            where = ("target", "vllm", "model") if name == "model" else ("target", "vllm", "serve_args")
            hint = 'serve each with model: "{model}"' if name == "model" else f"use {{{name}}} in serve_args"
            yield error(
                where,
                f"scope dimension {name!r} takes {len(values)} values but the servers never use {{{name}}}: "
                f"every value would start the same server ({hint})",
            )


def _speculative(data: Mapping[str, Any], vllm: Mapping[str, Any]) -> Iterator[Problem]:
    spec = (data.get("scope") or {}).get("speculative") if isinstance(data.get("scope"), dict) else None
    args = [str(a) for a in vllm.get("speculative_args") or ()]
    config = vllm.get("speculative_config")
    if args and not any("{draft_length}" in a for a in args):
        yield error(
            ("target", "vllm", "speculative_args"),
            "speculative_args never use {draft_length}: every draft length would start the same server",
        )
    tokens = config.get("num_speculative_tokens") if isinstance(config, Mapping) else None
    if tokens is not None and "{draft_length}" not in str(tokens):
        yield error(
            ("target", "vllm", "speculative_config", "num_speculative_tokens"),
            "leave num_speculative_tokens out (fasttrack sets it to each draft length) or write '{draft_length}'",
        )
    if isinstance(spec, Mapping) and spec.get("draft_lengths") and not (args or config):
        yield error(
            ("target", "vllm"),
            "scope.speculative declares draft lengths, but the vllm target says neither speculative_config nor "
            "speculative_args: the servers could not run them",
        )
