"""``target.openai`` as the typed `OpenAITarget`: each side a command fasttrack starts or a url it
reaches, and what applies to both (the model name, health path, timeouts, concurrency and the
drafting servers' ``speculative_args`` and ``speculative_env``). ``target.vllm`` and
``target.sglang`` are turned into this same form (`vllm_serve`, `sglang_launch`)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from fasttrack.manifest import sections as m


def env_map(env: Any) -> Mapping[str, str]:
    """A manifest's environment mapping (names and values as strings), read-only: every server
    target's ``env``, a side's own, the drafting servers' ``speculative_env``, a kernel suite's
    and a refused setting's."""
    return MappingProxyType({str(k): str(v) for k, v in (env or {}).items()})


def build(oa: Mapping[str, Any]) -> m.OpenAITarget:
    return m.OpenAITarget(
        _side(oa["baseline"]),
        _side(oa["candidate"]),
        oa.get("model_name"),
        oa.get("health_path", "/health"),
        float(oa.get("startup_timeout_s", 120.0)),
        float(oa.get("request_timeout_s", 300.0)),
        int(oa.get("concurrency", 64)),
        tuple(str(a) for a in oa.get("speculative_args") or ()),
        env_map(oa.get("speculative_env")),
    )


def _side(d: Mapping[str, Any]) -> m.OpenAISide:
    command = d.get("command")
    return m.OpenAISide(
        None if command is None else tuple(command),
        d.get("url"),
        env_map(d.get("env")),
        d.get("cwd"),
        tuple(int(c) for c in d.get("cpus") or ()),
    )
