"""One side of an ``sglang`` target: the server spec of the openai form the manifest derives from
``target.sglang`` (the side's launch command; environment switches set on the candidate and
removed from the baseline, as for every server target). Inside a run the engine's pool starts and
shares it (`fasttrack.targets.pool`); alone (a script, a test) the side starts its own server and
``close`` stops it.

Where SGLang's HTTP API differs from vLLM's, the capability is read or said to be missing, never
guessed: the engine build is SGLang's ``GET /get_server_info`` ``version`` (it serves no
``/version``; `fasttrack.targets.build.from_server`); ``/metrics`` exists only with
``--enable-metrics`` (a switch's metrics proof without it is a manifest error); the speculative
checks' acceptance counters are vLLM's (``spec_decode_num_*``), which SGLang does not serve (a
speculative scope is a manifest error). A side whose environment names
``SGLANG_TORCH_PROFILER_DIR`` has a kernel census from SGLang's own torch profiler
(`fasttrack.targets.sglang.profiler`, built by `fasttrack.targets.side_profiler`); without it
``profiler`` is None and the census is not run, and says so."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
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


def server_spec(
    manifest: Manifest, side: Side, point: Mapping[str, Any] | None, draft_length: int | None = None
) -> ServerSpec:
    """How one side's SGLang server is started at ``point``."""
    if manifest.target.sglang is None or manifest.target.openai is None:
        raise TargetError("target.kind is sglang but target.sglang is missing")
    return openai_spec(manifest, side, point, draft_length)


def open_sglang(
    manifest: Manifest,
    side: Side,
    point: Mapping[str, Any] | None,
    draft_length: int | None,
    log_dir: Path | None,
    switch_default: bool = False,
) -> OpenedSide:
    """One side started alone (outside a run's pool): `OpenedSide.close` stops it."""
    return open_spec(manifest, server_spec(manifest, side, point, draft_length), log_dir, "sglang")


def unavailable(manifest: Manifest) -> Unavailable | None:
    """SGLang is not installed here: the declared interpreter is missing, or (fasttrack's own
    interpreter) the ``sglang`` module is not importable."""
    sglang = manifest.target.sglang
    if sglang is None:
        return None
    if sglang.python:
        if shutil.which(sglang.python) is None and not Path(sglang.python).is_file():
            return Unavailable(f"{sglang.python!r} (target.sglang.python) is not installed here", sglang.python)
        return None
    if find_spec("sglang") is None:
        return Unavailable(
            "SGLang is not installed here (target.sglang: `python -m sglang.launch_server` needs `pip install sglang`)",
            "sglang",
        )
    return None
