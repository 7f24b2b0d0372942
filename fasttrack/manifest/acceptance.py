"""Synthetic speculative acceptance, found wherever a manifest's commands, arguments or
environment set it, as the engines spell it.

- vLLM: ``--speculative-config '{"method": "eagle3", ..., "rejection_sample_method": "synthetic",
  "synthetic_acceptance_length": 3.24}'`` (also ``--speculative-config={...}``, the dotted form
  ``--speculative-config.rejection_sample_method synthetic``, and ``synthetic_acceptance_rates``);
  ``rejection_sample_method`` is one of standard, synthetic, block.
- SGLang: the environment variable ``SGLANG_SIMULATE_ACC_LEN`` (a float; the default -1 and any
  value <= 0 mean off), in a side's ``env`` or as a ``NAME=value`` word of its command.

A word holding a whole shell command (``bash -c "vllm serve ... --speculative-config '{...}'"``)
is split and searched too. Placeholders such as ``{draft_length}`` inside the JSON are read as
numbers. Pure functions over manifest data: validate, the planner and the claims lint use them.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

VLLM_FLAG = "--speculative-config"
SYNTHETIC_KEYS = ("synthetic_acceptance_length", "synthetic_acceptance_rates")
SGLANG_ENV = "SGLANG_SIMULATE_ACC_LEN"
SIDES = ("baseline", "candidate")
_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
_METHOD_RE = re.compile(r'"rejection_sample_method"\s*:\s*"synthetic"')
_LENGTH_RE = re.compile(r'"synthetic_acceptance_length"\s*:\s*([0-9.eE+-]+)')
_RATES_RE = re.compile(r'"synthetic_acceptance_rates"\s*:')


@dataclass(frozen=True)
class SyntheticAcceptance:
    """One place that forces speculative acceptance: where (a manifest path), how (as written)."""

    where: tuple[str | int, ...]  # e.g. ("target", "openai", "candidate", "command")
    how: str  # e.g. "--speculative-config rejection_sample_method=synthetic, synthetic_acceptance_length=3.24"
    acceptance_length: float | None = None
    drafts_only: bool = False  # set by speculative_args: only checks at a draft length run with it
    also: tuple[tuple[str | int, ...], ...] = ()  # the same setting found at other places (`once`)

    def label(self) -> str:
        length = f", acceptance length {self.acceptance_length:g}" if self.acceptance_length is not None else ""
        return f"{self.how}{length}"

    def places(self) -> str:
        """Where it is set, every place once: ``target.openai.baseline.env, target.openai.candidate.env``."""
        return ", ".join(dict.fromkeys(".".join(str(p) for p in where) for where in (self.where, *self.also)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "where": self.places(),
            "how": self.how,
            "acceptance_length": self.acceptance_length,
            "drafts_only": self.drafts_only,
        }


def once(found: Iterable[SyntheticAcceptance]) -> list[SyntheticAcceptance]:
    """Each source once, with every place it was found: the same setting on both sides (or in
    several sections) is one source, not one per place."""
    merged: dict[tuple[str, float | None, bool], SyntheticAcceptance] = {}
    for item in found:
        key = (item.how, item.acceptance_length, item.drafts_only)
        first = merged.get(key)
        merged[key] = item if first is None else replace(first, also=(*first.also, item.where, *item.also))
    return list(merged.values())


def once_dicts(found: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`once` over the evidence's form (``to_dict``): places joined into one ``where``."""
    merged: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    for item in found:
        key = (item.get("how"), item.get("acceptance_length"), item.get("drafts_only", False))
        if key not in merged:
            merged[key] = dict(item)
            continue
        places = [*str(merged[key].get("where", "")).split(", "), *str(item.get("where", "")).split(", ")]
        merged[key]["where"] = ", ".join(dict.fromkeys(p for p in places if p))
    return list(merged.values())


def _speculative_json(text: str) -> tuple[str, float | None] | None:
    """(how, length) when a --speculative-config value forces acceptance, else None."""
    try:
        value = json.loads(_PLACEHOLDER.sub("0", text))
    except ValueError:
        value = None
    if isinstance(value, Mapping):
        parts = []
        if str(value.get("rejection_sample_method", "")).lower() == "synthetic":
            parts.append("rejection_sample_method=synthetic")
        for key in SYNTHETIC_KEYS:
            if value.get(key) is not None:
                parts.append(f"{key}={value[key]}")
        if not parts:
            return None
        length = value.get("synthetic_acceptance_length")
        return f"{VLLM_FLAG} {', '.join(parts)}", float(length) if isinstance(length, (int, float)) else None
    # Not JSON we can read (a shell variable inside, say): look for the keys themselves.
    found = [m for m in (_METHOD_RE.search(text), _LENGTH_RE.search(text), _RATES_RE.search(text)) if m]
    if not found:
        return None
    length = _LENGTH_RE.search(text)
    return f"{VLLM_FLAG} (as written: {text[:120]})", _float(length.group(1)) if length else None


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _sglang_value(value: str) -> tuple[bool, float | None]:
    """(on, length) of a SGLANG_SIMULATE_ACC_LEN value: a number > 0 is on; <= 0 or empty is off;
    anything unreadable (a shell variable) is taken as on, length unknown (fail closed)."""
    text = value.strip().strip("'\"")
    if not text:
        return False, None
    number = _float(text)
    if number is None:
        return True, None
    return number > 0, number if number > 0 else None


def in_arguments(words: Sequence[str]) -> list[tuple[str, float | None]]:
    """(how, acceptance length) for every place a command line forces acceptance."""
    found: list[tuple[str, float | None]] = []
    words = [str(w) for w in words]
    for i, word in enumerate(words):
        if word == VLLM_FLAG and i + 1 < len(words):
            hit = _speculative_json(words[i + 1])
        elif word.startswith(VLLM_FLAG + "="):
            hit = _speculative_json(word.split("=", 1)[1])
        elif word.startswith(VLLM_FLAG + "."):
            key, _, inline = word[len(VLLM_FLAG) + 1 :].partition("=")
            value = inline or (words[i + 1] if i + 1 < len(words) else "")
            hit = None
            if key == "rejection_sample_method" and value.strip("'\"").lower() == "synthetic":
                hit = (f"{VLLM_FLAG}.rejection_sample_method synthetic", None)
            elif key in SYNTHETIC_KEYS:
                hit = (f"{VLLM_FLAG}.{key} {value}", _float(value) if key == "synthetic_acceptance_length" else None)
        elif word.startswith(SGLANG_ENV + "="):
            on, length = _sglang_value(word.split("=", 1)[1])
            hit = (f"{SGLANG_ENV}={word.split('=', 1)[1]}", length) if on else None
        elif " " in word and (VLLM_FLAG in word or SGLANG_ENV in word):
            try:
                inner = shlex.split(word)
            except ValueError:
                inner = word.split()
            found.extend(in_arguments(inner))
            continue
        else:
            continue
        if hit is not None:
            found.append(hit)
    return found


def in_environment(env: Mapping[str, Any]) -> list[tuple[str, float | None]]:
    found: list[tuple[str, float | None]] = []
    if SGLANG_ENV in env:
        on, length = _sglang_value(str(env[SGLANG_ENV]))
        if on:
            found.append((f"{SGLANG_ENV}={env[SGLANG_ENV]}", length))
    for name, value in env.items():  # a variable holding a command line (VLLM_ARGS, SERVE_ARGS ...)
        if name != SGLANG_ENV and isinstance(value, str) and VLLM_FLAG in value:
            found.extend(in_arguments([value]))
    return found


def in_target(data: Mapping[str, Any]) -> list[SyntheticAcceptance]:
    """Every place ``target.openai`` (or ``target.vllm``, ``target.sglang``) forces acceptance
    (commands, env, speculative_args)."""
    target = data.get("target")
    if isinstance(target, Mapping) and isinstance(target.get("vllm"), Mapping):
        return in_vllm_target(target["vllm"])
    if isinstance(target, Mapping) and isinstance(target.get("sglang"), Mapping):
        return in_sglang_target(target["sglang"])
    openai = target.get("openai") if isinstance(target, Mapping) else None
    if not isinstance(openai, Mapping):
        return []
    found: list[SyntheticAcceptance] = []
    for side in ("baseline", "candidate"):
        conf = openai.get(side)
        if not isinstance(conf, Mapping):
            continue
        where = ("target", "openai", side)
        for how, length in in_arguments(list(conf.get("command") or ())):
            found.append(SyntheticAcceptance((*where, "command"), how, length))
        for how, length in in_environment(dict(conf.get("env") or {})):
            found.append(SyntheticAcceptance((*where, "env"), how, length))
    for how, length in in_arguments(list(openai.get("speculative_args") or ())):
        found.append(SyntheticAcceptance(("target", "openai", "speculative_args"), how, length, drafts_only=True))
    for how, length in in_environment(dict(openai.get("speculative_env") or {})):
        found.append(SyntheticAcceptance(("target", "openai", "speculative_env"), how, length, drafts_only=True))
    return found


def in_vllm_target(vllm: Mapping[str, Any]) -> list[SyntheticAcceptance]:
    """Every place ``target.vllm`` forces acceptance (serve_args, env, speculative settings)."""
    found: list[SyntheticAcceptance] = []
    for where, conf in ((("target", "vllm"), vllm), *((("target", "vllm", s), vllm.get(s) or {}) for s in SIDES)):
        if not isinstance(conf, Mapping):
            continue
        for how, length in in_arguments([str(a) for a in conf.get("serve_args") or ()]):
            found.append(SyntheticAcceptance((*where, "serve_args"), how, length))
        for how, length in in_environment(dict(conf.get("env") or {})):
            found.append(SyntheticAcceptance((*where, "env"), how, length))
    spec = [str(a) for a in vllm.get("speculative_args") or ()]
    if isinstance(vllm.get("speculative_config"), Mapping):
        spec = ["--speculative-config", json.dumps(dict(vllm["speculative_config"]))]
    for how, length in in_arguments(spec):
        found.append(SyntheticAcceptance(("target", "vllm", "speculative_args"), how, length, drafts_only=True))
    for how, length in in_environment(dict(vllm.get("speculative_env") or {})):
        found.append(SyntheticAcceptance(("target", "vllm", "speculative_env"), how, length, drafts_only=True))
    return found


def in_sglang_target(sglang: Mapping[str, Any]) -> list[SyntheticAcceptance]:
    """Every place ``target.sglang`` forces acceptance (``SGLANG_SIMULATE_ACC_LEN`` in an env, or
    a ``NAME=value`` word of its server_args)."""
    found: list[SyntheticAcceptance] = []
    for where, conf in (
        (("target", "sglang"), sglang),
        *((("target", "sglang", s), sglang.get(s) or {}) for s in SIDES),
    ):
        if not isinstance(conf, Mapping):
            continue
        for how, length in in_arguments([str(a) for a in conf.get("server_args") or ()]):
            found.append(SyntheticAcceptance((*where, "server_args"), how, length))
        for how, length in in_environment(dict(conf.get("env") or {})):
            found.append(SyntheticAcceptance((*where, "env"), how, length))
    return found


def in_setup(setup: Mapping[str, Any] | None) -> list[tuple[str, float | None]]:
    """A benchmark or claim setup's ``engine_args`` that force acceptance."""
    return in_arguments(list((setup or {}).get("engine_args") or ()))


def benchmark_synthetic(data: Mapping[str, Any], benchmark: Mapping[str, Any]) -> list[SyntheticAcceptance]:
    """What forces acceptance on a benchmark's runs: the target (speculative_args only when the
    benchmark runs at a draft length) and the benchmark's own setups' engine_args."""
    at_drafts = "draft_length" in (benchmark.get("points") or {}) or any(
        ((s or {}).get("speculative") or {}).get("method") not in (None, "none")
        for s in (benchmark.get("setups") or {}).values()
    )
    found = [s for s in in_target(data) if at_drafts or not s.drafts_only]
    for side, setup in (benchmark.get("setups") or {}).items():
        for how, length in in_setup(setup):
            found.append(SyntheticAcceptance(("benchmarks", str(benchmark.get("id")), "setups", side), how, length))
    return once(found)


def describe(found: Iterable[SyntheticAcceptance]) -> str:
    return "; ".join(f"{s.places()}: {s.label()}" for s in once(found))
