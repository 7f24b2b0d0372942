"""CPU scope points: CUDA hidden from their processes, and one intra-op thread for in-process
targets on CPU.

A cpu point means the CPU, on any machine: its kernel tests, stress audit and target (and the
tensor-parallel ranks they start) run with no visible accelerator (``cpu_only_env``), so they
take the gloo / CPU paths a laptop or a CPU CI runner takes, instead of finding the GPU of a GPU
host and skipping or moving there. ``--hardware cpu`` gives the same outcomes everywhere.

The engine runs one check at a time in a worker process, and a target's tensor-parallel ranks
are processes of their own, so a second OpenMP thread in the worker only contends with them and
with whatever else shares the host; OpenMP threads then spin waiting for each other. Measured on
the 2-core host with other jobs running (load ~11), mini-k3 generating 8 x 32 greedy tokens:
15.1 s on the default 2 threads, 1.2 s on 1. The example's own tests pin one thread for the
same reason. Both sides of a comparison run in the same worker, so both get the same setting;
benchmarks record it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

# What hides every accelerator from a process and its children: CUDA (NVIDIA, and ROCm builds of
# torch, which honour it too) and HIP.
CPU_ONLY_ENV: Mapping[str, str] = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}


def is_cpu_point(point: Mapping[str, Any] | Any | None) -> bool:
    """A scope point on the CPU (a global check, with no point, is not one: it runs as it is)."""
    if point is None:
        return False
    accelerator = point.get("accelerator") if hasattr(point, "get") else None
    return accelerator is not None and str(accelerator).lower() == "cpu"


def cpu_only_env(point: Mapping[str, Any] | Any | None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` plus, at a cpu point, the variables that hide every accelerator (they win over
    the manifest's own: a cpu point that ran on a GPU would not be the point it claims)."""
    merged = dict(env or {})
    if is_cpu_point(point):
        merged.update(CPU_ONLY_ENV)
    return merged


if TYPE_CHECKING:
    from fasttrack.manifest import Manifest


def pin_single_thread(manifest: Manifest, point: Mapping[str, Any] | None) -> int | None:
    """Set torch's intra-op threads to 1 when the target runs in this process on CPU; returns the
    thread count set, or None when nothing was changed (HTTP target, GPU point, no torch)."""
    if getattr(manifest.target, "kind", None) != "python":
        return None
    if str((point or {}).get("accelerator", "cpu")).lower() != "cpu":
        return None
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    return 1
