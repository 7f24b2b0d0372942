"""One side of a ``vllm`` target: the server spec of the openai form the manifest derives from
``target.vllm`` (the side's command, environment switches set on the candidate and removed from
the baseline, ``--speculative-config`` at a draft length), plus an empty
``PROMETHEUS_MULTIPROC_DIR`` of its own, so that a plugin's counters reach ``/metrics`` (vLLM
serves them from its API process, and counters made in the engine's processes only through that
folder). Inside a run the engine's pool starts and shares it (`fasttrack.targets.pool`); alone
(a script, a test) the side starts its own server and ``close`` stops it."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import replace
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.errors import TargetError
from fasttrack.targets.openai.server import ServerSpec
from fasttrack.targets.openai.side import open_spec
from fasttrack.targets.openai.side import server_spec as openai_spec
from fasttrack.targets.protocol import OpenedSide, Side, Unavailable

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest

METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"


def server_spec(
    manifest: Manifest, side: Side, point: Mapping[str, Any] | None, draft_length: int | None = None
) -> ServerSpec:
    """How one side's vLLM server is started at ``point`` (and ``draft_length``)."""
    if manifest.target.vllm is None or manifest.target.openai is None:
        raise TargetError("target.kind is vllm but target.vllm is missing")
    spec = openai_spec(manifest, side, point, draft_length)
    env = {k: v for k, v in spec.env.items() if k != METRICS_DIR_ENV}
    return replace(spec, env=env, fresh_dirs=(*spec.fresh_dirs, METRICS_DIR_ENV))


def open_vllm(
    manifest: Manifest,
    side: Side,
    point: Mapping[str, Any] | None,
    draft_length: int | None,
    log_dir: Path | None,
    switch_default: bool = False,
) -> OpenedSide:
    """One side started alone (outside a run's pool): `OpenedSide.close` stops it."""
    return open_spec(manifest, server_spec(manifest, side, point, draft_length), log_dir, "vllm")


def unavailable(manifest: Manifest) -> Unavailable | None:
    """vLLM is not installed here (the module form needs it importable, ``vllm serve`` on PATH)."""
    vllm = manifest.target.vllm
    if vllm is None or manifest.target.openai is None:
        return None
    program = manifest.target.openai.baseline.command[0] if manifest.target.openai.baseline.command else ""
    if program == "vllm":
        if shutil.which("vllm") is None:
            return Unavailable("vLLM's `vllm` program is not installed here (target.vllm, launcher console)", "vllm")
        return None
    if find_spec("vllm") is None:
        return Unavailable(f"vLLM is not installed for {program} (target.vllm: `pip install vllm`)", "vllm")
    return None
