"""The kernel census of an SGLang server side from SGLang's own torch profiler.

SGLang profiles between ``POST /start_profile`` and ``POST /stop_profile`` (its HTTP server,
``ProfileReqInput``: ``output_dir``, ``num_steps``, ``activities`` ``["CPU", "GPU"]``,
``with_stack``, ``record_shapes``, ``profile_by_stage`` ...). Without ``output_dir`` a scheduler
writes into ``SGLANG_TORCH_PROFILER_DIR`` (default ``/tmp``); the gate always sends the side's
``SGLANG_TORCH_PROFILER_DIR`` as ``output_dir``, so both agree. At ``/stop_profile`` each rank's
scheduler exports a Chrome trace named ``[prefix-]<profile_id>-TP-<rank>[-DP-..][-PP-..][-EP-..]
.trace.json.gz`` (`fasttrack.targets.profiler.read_trace` reads it) before the request answers.

SGLang marks each forward step: ``ModelRunner.forward`` runs inside ``profile_range(
build_step_span_name(forward_batch))``, a ``torch.profiler.record_function`` while a profiler is
active, named ``step[DECODE bs=<B>]`` for a decode step of B requests (``step[EXTEND bs=.. toks=..]``
for a prefill; extra ``key=value`` terms when roofline annotations are on). So the census is
per decode step, as vLLM's (`fasttrack.targets.profiler.ServerProfiler`): the top-level operators
inside each ``step[DECODE bs=B]`` span on a CPU, and on a GPU the kernels launched from inside it
(`fasttrack.targets.gpu_trace`: with CUDA/HIP graphs, SGLang's decode default, the host runs one
graph launch where eager mode runs every operator; the kernels of the replayed graph still name
the path). A trace without such spans (an SGLang that does not mark
its steps), no trace at all, or an unreadable one is `CensusUnavailable`: the proof is not run,
never passed."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from fasttrack.errors import TargetError
from fasttrack.manifest.profiling import SGLANG_PROFILER_ENV
from fasttrack.targets.profiler import ServerProfiler, checkpoint_layers
from fasttrack.targets.protocol import CensusUnavailable

SGLANG_DECODE_STEP = re.compile(r"step\[DECODE bs=(\d+)(?: [^\]]*)?\]")


class SglangProfiler(ServerProfiler):
    """`Profiling` for an SGLang server whose torch profiler writes into ``trace_dir``."""

    ENGINE = "SGLang"
    STEP = SGLANG_DECODE_STEP
    TRACE_GLOB = "*.trace.json.gz"  # SGLang's names: no ".pt" (vLLM's have one)
    RANK0 = "-TP-0"
    # SGLang's /stop_profile answers once its schedulers exported their traces: a short grace only.
    TRACE_WAIT_S = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trace_wait_s = min(self.timeout_s, self.TRACE_WAIT_S)

    def _start_body(self) -> dict[str, Any]:
        # SGLang's spelling; no Python stacks or shapes: the census reads operator names only.
        return {"output_dir": str(self.trace_dir), "activities": ["CPU", "GPU"], "with_stack": False}

    def _no_step(self, trace: Path, batch: int) -> NoReturn:
        raise CensusUnavailable(
            f"{self.base_url}: the SGLang profiler trace {trace.name} holds no 'step[DECODE bs={batch}]' span "
            "(SGLang's ModelRunner.forward marks each forward step so; a version without it cannot be "
            "counted per decode step)"
        )

    def _no_trace(self, last: TargetError | None) -> NoReturn:
        raise CensusUnavailable(
            f"{self.base_url}: no complete SGLang profiler trace (*.trace.json.gz) appeared in {self.trace_dir} "
            f"within {self.trace_wait_s:g} s of /stop_profile" + (f" ({last})" if last else "")
        )


def sglang_profiler(
    env: Mapping[str, str],
    command: Sequence[str],
    url: str,
    *,
    cwd: Path | None = None,
    model: str | None = None,
    server_dir: Path | None = None,
) -> SglangProfiler | None:
    """An `SglangProfiler` for a side whose environment names ``SGLANG_TORCH_PROFILER_DIR``
    (``{server_dir}`` in it: the server's own folder); None for a side that names none."""
    folder = str(env.get(SGLANG_PROFILER_ENV) or "")
    if not folder:
        return None
    if server_dir is not None:
        folder = folder.replace("{server_dir}", str(server_dir))
    path = Path(folder)
    if not path.is_absolute() and cwd is not None:
        path = Path(cwd) / path
    return SglangProfiler(url, path, model=model, n_layers=checkpoint_layers(command, cwd))
