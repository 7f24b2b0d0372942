"""One intra-op thread for in-process targets on CPU.

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
