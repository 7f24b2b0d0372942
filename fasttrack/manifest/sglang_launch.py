"""``target.sglang`` as the server commands fasttrack runs (the ``openai`` form every server-facing
check already reads): SGLang's own launch command,
``python -m sglang.launch_server --model-path MODEL_PATH``, then ``--served-model-name``,
``--host 127.0.0.1 --port {port}``, the common ``server_args`` and the side's own.

``python`` is the interpreter SGLang is installed in (default: fasttrack's own, the one a
``pip install sglang`` beside fasttrack gives). The requests name the served model: SGLang's own
default for ``--served-model-name`` is the model path, which fasttrack passes explicitly so that
the gate's requests and the server agree whatever the version's default. SGLang's benchmark
client (a ``sglang_bench`` workload) runs as ``PYTHON -m sglang.bench_serving``."""

from __future__ import annotations

import sys
from typing import Any

from fasttrack.manifest import sections as m
from fasttrack.manifest.openai_servers import env_map

MODULE = "sglang.launch_server"
BENCH_MODULE = "sglang.bench_serving"
DATA_PARALLEL_FLAG = "--dp-size"
DATA_PARALLEL_ALIASES = ("--dp-size", "--dp", "--data-parallel-size")
# Flags fasttrack passes itself: the model, its served name, where it listens.
OWN_FLAGS = ("--model-path", "--model", "--served-model-name", "--port", "--host")


def interpreter(sglang: m.SglangTarget | None) -> str:
    return (sglang.python if sglang is not None else None) or sys.executable


def served_name(sglang: m.SglangTarget) -> str:
    return sglang.served_model_name or sglang.model_path


def side_command(sglang: m.SglangTarget, side: str, data_parallel: bool = False) -> tuple[str, ...]:
    """The side's launch command; with data parallelism in the scope (and no ``--dp-size`` of the
    manifest's own) the point's degree as ``--dp-size``."""
    own: m.SglangSide = getattr(sglang, side)
    args = (*sglang.server_args, *own.server_args)
    if data_parallel and not any(str(a).split("=", 1)[0] in DATA_PARALLEL_ALIASES for a in args):
        args = (*args, DATA_PARALLEL_FLAG, "{data_parallel}")
    return (
        interpreter(sglang),
        "-m",
        MODULE,
        "--model-path",
        sglang.model_path,
        "--served-model-name",
        served_name(sglang),
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
        *args,
    )


def bench_words(sglang: m.SglangTarget | None) -> tuple[str, ...]:
    """How SGLang's benchmark client is started: the target's interpreter (fasttrack's own for an
    ``openai`` target)."""
    return (interpreter(sglang), "-m", BENCH_MODULE)


def as_openai(sglang: m.SglangTarget, data_parallel: bool = False) -> m.OpenAITarget:
    """The two servers in the form the ``openai`` target and the server-facing checks read."""
    sides = {
        side: m.OpenAISide(
            command=side_command(sglang, side, data_parallel),
            env=m.freeze({**sglang.env, **getattr(sglang, side).env}),
            cpus=getattr(sglang, side).cpus,
        )
        for side in ("baseline", "candidate")
    }
    return m.OpenAITarget(
        sides["baseline"],
        sides["candidate"],
        model_name=served_name(sglang),
        health_path="/health",  # 503 while SGLang starts, 200 once it generates
        startup_timeout_s=sglang.startup_timeout_s,
        request_timeout_s=sglang.request_timeout_s,
        concurrency=sglang.concurrency,
    )


def build(d: dict[str, Any]) -> m.SglangTarget:
    def side(name: str) -> m.SglangSide:
        own = d.get(name) or {}
        return m.SglangSide(
            tuple(str(a) for a in own.get("server_args") or ()),
            env_map(own.get("env")),
            tuple(int(c) for c in own.get("cpus") or ()),
        )

    return m.SglangTarget(
        model_path=str(d["model_path"]),
        served_model_name=d.get("served_model_name"),
        server_args=tuple(str(a) for a in d.get("server_args") or ()),
        env=env_map(d.get("env")),
        baseline=side("baseline"),
        candidate=side("candidate"),
        python=d.get("python"),
        startup_timeout_s=float(d.get("startup_timeout_s", 600.0)),
        request_timeout_s=float(d.get("request_timeout_s", 300.0)),
        concurrency=int(d.get("concurrency", 64)),
    )
