"""Which server sides run their engine's torch profiler, read from the manifest alone: a side's
server command (``target.openai.<side>.command``, or ``target.vllm``'s common and own
``serve_args``, plus a benchmark's ``setups.<side>.engine_args``) with ``--profiler-config``
naming the torch profiler and a ``torch_profiler_dir`` (vLLM); for ``target.sglang``, the side's
environment (``target.sglang.env`` or ``target.sglang.<side>.env``) naming
``SGLANG_TORCH_PROFILER_DIR`` (SGLang's own variable: where its torch profiler writes). Only such
a side has a kernel census (`fasttrack.targets.profiler`, `fasttrack.targets.sglang.profiler`),
so a census metric (``kernels_per_step`` ...) on a server target is measurable only where both
sides have one: validate refuses it elsewhere and the planner never plans it as runnable; an
``sglang`` switch proven by its census (``proof.source: census``) is refused the same way."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from fasttrack.manifest.sections import SERVER_KINDS

# Benchmark metrics read from the kernel census of both sides (no timed pairs).
CENSUS_METRICS = ("kernels_per_layer", "kernels_per_step", "per_layer_latency_us", "per_step_latency_us")
PROFILER_FLAG = "--profiler-config"
# SGLang's torch profiler output folder, in an ``sglang`` side's environment (SGLang's own variable).
SGLANG_PROFILER_ENV = "SGLANG_TORCH_PROFILER_DIR"


def profiler_config_dir(words: Sequence[str]) -> str | None:
    """The ``torch_profiler_dir`` of a command's ``--profiler-config`` (None: not profiled)."""
    words = [str(w) for w in words]
    for i, word in enumerate(words):
        value = None
        if word == PROFILER_FLAG and i + 1 < len(words):
            value = words[i + 1]
        elif word.startswith(f"{PROFILER_FLAG}="):
            value = word.split("=", 1)[1]
        if value is None:
            continue
        try:
            config = json.loads(value)
        except json.JSONDecodeError:
            return None
        if isinstance(config, dict) and config.get("profiler") == "torch" and config.get("torch_profiler_dir"):
            return str(config["torch_profiler_dir"])
    return None


def _target(data: Mapping[str, Any]) -> Mapping[str, Any]:
    target = data.get("target")
    return target if isinstance(target, Mapping) else {}


def side_words(data: Mapping[str, Any], side: str, bench: Mapping[str, Any] | None = None) -> list[str] | None:
    """The words a server target starts ``side``'s server with, as the manifest gives them (the
    benchmark's own ``engine_args`` appended); None for a side at a url or an in-process target."""
    target = _target(data)
    kind = target.get("kind")
    if kind == "vllm":
        vllm = target.get("vllm") or {}
        words = [*(vllm.get("serve_args") or ()), *((vllm.get(side) or {}).get("serve_args") or ())]
    elif kind == "openai":
        conf = (target.get("openai") or {}).get(side) or {}
        if not conf.get("command"):
            return None
        words = list(conf.get("command") or ())
    else:
        return None
    own = ((bench or {}).get("setups") or {}).get(side) or {}
    return [str(w) for w in (*words, *(own.get("engine_args") or ()))]


def side_profiled(data: Mapping[str, Any], side: str, bench: Mapping[str, Any] | None = None) -> bool:
    """Whether ``side``'s server runs its engine's torch profiler (has a kernel census)."""
    target = _target(data)
    if target.get("kind") == "sglang":
        sglang = target.get("sglang") if isinstance(target.get("sglang"), Mapping) else {}
        assert isinstance(sglang, Mapping)
        env = {**(sglang.get("env") or {}), **((sglang.get(side) or {}).get("env") or {})}
        return bool(env.get(SGLANG_PROFILER_ENV))
    words = side_words(data, side, bench)
    return words is not None and profiler_config_dir(words) is not None


def unprofiled_sides(data: Mapping[str, Any], bench: Mapping[str, Any]) -> list[str]:
    """The sides of a server target with no kernel census for ``bench`` (no torch profiler in
    their command, or an SGLang side's environment); [] for an in-process target or a benchmark
    that reads no census."""
    target = _target(data)
    if target.get("kind") not in SERVER_KINDS or bench.get("metric") not in CENSUS_METRICS:
        return []
    if (bench.get("workload") or {}).get("kind") == "vllm_bench":
        return []
    return [side for side in ("baseline", "candidate") if not side_profiled(data, side, bench)]


def sglang_unprofiled(data: Mapping[str, Any]) -> list[str]:
    """The sides of an ``sglang`` target whose environment names no ``SGLANG_TORCH_PROFILER_DIR``."""
    return [side for side in ("baseline", "candidate") if not side_profiled(data, side)]


def census_refusal(data: Mapping[str, Any], bench: Mapping[str, Any]) -> str | None:
    """Why ``bench``'s census metric cannot be measured on this manifest's server target, or None."""
    missing = unprofiled_sides(data, bench)
    if not missing:
        return None
    kind = (data.get("target") or {}).get("kind")
    if kind == "sglang":
        return (
            f"metric {bench.get('metric')} is read from both sides' kernel census, which an sglang target has "
            f"only from SGLang's torch profiler: the {' and '.join(missing)} "
            f"{'server names' if len(missing) == 1 else 'servers name'} no {SGLANG_PROFILER_ENV} (add "
            f'{SGLANG_PROFILER_ENV}: "{{server_dir}}/traces" to target.sglang.env, or measure a rate metric)'
        )
    where = "serve_args" if kind == "vllm" else "command"
    return (
        f"metric {bench.get('metric')} is read from both sides' kernel census, which a server target "
        f"(target.kind {kind}) has only from vLLM's torch profiler: the {' and '.join(missing)} "
        f"{'server has' if len(missing) == 1 else 'servers have'} none (add {PROFILER_FLAG} "
        '\'{"profiler": "torch", "torch_profiler_dir": "{server_dir}/traces"}\' to its '
        f"{where}, or measure a rate metric)"
    )
