"""Which profiler a server side has, by its engine: vLLM's torch profiler where the command
passes ``--profiler-config`` (`fasttrack.targets.profiler`), SGLang's where an ``sglang`` side's
environment names ``SGLANG_TORCH_PROFILER_DIR`` (`fasttrack.targets.sglang.profiler`)."""

from __future__ import annotations

from pathlib import Path

from fasttrack.targets.openai.server import ServerSpec
from fasttrack.targets.profiler import server_profiler
from fasttrack.targets.protocol import Profiling


def side_profiler(
    kind: str, spec: ServerSpec, url: str, *, model: str | None, server_dir: Path | None
) -> Profiling | None:
    """The side's `Profiling` (its kernel census), or None where its server runs no profiler."""
    cwd = Path(spec.cwd) if spec.cwd else None
    if kind == "sglang":
        from fasttrack.targets.sglang.profiler import sglang_profiler

        return sglang_profiler(spec.env, spec.command or (), url, cwd=cwd, model=model, server_dir=server_dir)
    return server_profiler(spec.command or (), url, cwd=cwd, model=model, server_dir=server_dir)
