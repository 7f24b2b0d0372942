"""Rules of a ``target.vllm`` or ``target.sglang`` section (an engine's own serving config): the
flags fasttrack sets itself, the environment switches per side (as for openai targets),
placeholders, and (vLLM) the draft length's place."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ServingConfig:
    """How one engine's section spells its parts."""

    kind: str  # the target kind and its section: "vllm" | "sglang"
    args: str  # the list of the engine's own flags: "serve_args" | "server_args"
    model: str  # the model key: "model" | "model_path"
    own_flags: tuple[str, ...]  # flags fasttrack sets itself


VLLM = ServingConfig("vllm", "serve_args", "model", OWN_FLAGS)


def vllm_target(data: Mapping[str, Any], env_switches: Any) -> Iterator[Problem]:
    vllm = data["target"].get("vllm")
    if data["target"]["kind"] != "vllm" or not isinstance(vllm, Mapping):
        return
    yield from serving_config(data, env_switches, VLLM)
    yield from _speculative(data, vllm)


def serving_config(data: Mapping[str, Any], env_switches: Any, how: ServingConfig) -> Iterator[Problem]:
    """The rules every engine serving config shares (module docstring)."""
    conf_all = data["target"][how.kind]
    switches = [s for _p, s in switch_entries(data)]
    engine = engine_dimensions(data["scope"]) if isinstance(data.get("scope"), dict) else {}
    known = (*PLACEHOLDERS, *engine)
    for where, conf in (((), conf_all), *(((side,), conf_all.get(side) or {}) for side in ("baseline", "candidate"))):
        path = ("target", how.kind, *where)
        for index, arg in enumerate(conf.get(how.args) or ()):
            flag = str(arg).split("=", 1)[0]
            if flag in how.own_flags:
                yield error(
                    (*path, how.args, index),
                    f"{flag} is set by fasttrack (model, served_model_name, its own free port): leave it out of {how.args}",
                )
        words = [str(a) for a in conf.get(how.args) or ()] + [str(v) for v in (conf.get("env") or {}).values()]
        for word in words:
            for name in PLACEHOLDER_RE.findall(word):
                if name not in known or name == "port":
                    yield error(path, f"unknown placeholder {{{name}}} in {word!r}; known: {', '.join(known)}")
    for side in ("baseline", "candidate"):
        own = conf_all.get(side) or {}
        merged = {"env": {**(conf_all.get("env") or {}), **(own.get("env") or {})}, "command": []}
        yield from env_switches(switches, side, merged, ("target", how.kind, side))
        flags: list[tuple[str, str | None]] = [
            (str(s["name"]), (s.get("enable") or {}).get("server_flag")) for s in switches
        ]
        args = [*(conf_all.get(how.args) or ()), *(own.get(how.args) or ())]
        for switch_name, server_flag in flags:
            if server_flag and side == "candidate" and server_flag not in args:
                yield error(
                    ("target", how.kind, side, how.args),
                    f"the candidate's {how.args} do not turn the switch on: they lack {server_flag} (switch {switch_name!r})",
                )
            if server_flag and side == "baseline" and server_flag in args:
                yield error(
                    ("target", how.kind, how.args),
                    f"the baseline's {how.args} turn the switch on ({server_flag}): put it in candidate.{how.args}",
                )
    yield from _varying(conf_all, engine, how, data.get("scope"))


def _varying(
    conf: Mapping[str, Any], engine: Mapping[str, list[Any]], how: ServingConfig, scope: Any
) -> Iterator[Problem]:
    """A dimension with several values must change how the servers start: the checkpoints through
    ``{model}`` in the model, an engine dimension through a placeholder (data parallelism:
    fasttrack adds the engine's data-parallel flag)."""
    model = str(conf.get(how.model))
    where_model = ("target", how.kind, how.model)
    for name in PLACEHOLDER_RE.findall(model):
        if name not in engine or name == "port":
            yield error(where_model, f"unknown placeholder {{{name}}} in {model!r}")
    if "{model}" in model and not conf.get("served_model_name"):
        yield error(
            where_model, "several checkpoints are served under one name the requests use: give served_model_name"
        )
    sides = [conf, conf.get("baseline") or {}, conf.get("candidate") or {}]
    words = [model, *(str(a) for side in sides for a in (side.get(how.args) or ()))]
    words += [str(v) for side in sides for v in (side.get("env") or {}).values()]
    used = {name for word in words for name in PLACEHOLDER_RE.findall(word)} | {"data_parallel"}
    for name, value in single_valued_engine(scope).items():
        if name not in used:
            yield warning(
                ("scope", "engine", name),
                single_value_unused(name, value, "the servers never use", f"{how.args} or env"),
            )
    for name, values in engine.items():
        if len(values) > 1 and name not in used:
            where = where_model if name == "model" else ("target", how.kind, how.args)
            hint = f'serve each with {how.model}: "{{model}}"' if name == "model" else f"use {{{name}}} in {how.args}"
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
    if vllm.get("speculative_env") and not (isinstance(spec, Mapping) and spec.get("draft_lengths")):
        yield warning(
            ("target", "vllm", "speculative_env"),
            "speculative_env is set, but scope.speculative declares no draft length: no server is started with it",
        )
    if isinstance(spec, Mapping) and spec.get("draft_lengths") and not (args or config):
        yield error(
            ("target", "vllm"),
            "scope.speculative declares draft lengths, but the vllm target says neither speculative_config nor "
            "speculative_args: the servers could not run them",
        )
