"""The switches of the latency-specialised decode path, one per technique (for ablation)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

# Token count (batch x tokens per row) up to which the small-batch kernels run, per device type.
# CPU: the small-batch MoE form reads every expert, which only pays while a step is launch- and
# overhead-bound (measured with benchmarks/latency_path.py). CUDA: the Triton GEMV holds all rows
# of a step in registers, so it is limited to a few rows.
DEFAULT_SWITCH_POINT = {"cpu": 8, "cuda": 16}


@dataclass(frozen=True)
class LatencyOptions:
    """Which of the four techniques the latency path uses; each can be turned off on its own.

    small_batch_kernels: technique 1, kernels chosen by the step's token count
        (``switch_point`` tokens or fewer: small-batch kernels; more: the large-batch ones;
        kernel_choice.py).
    fused_allreduce: technique 2, ``o_proj`` writes its partial into the shared buffer and the
        ranks reduce it after one synchronisation (fused_allreduce.py).
    split_projections: technique 3, the latent down-projections (``q_a_proj``, ``kv_a_proj``) and
        the router are computed as one slice of output features per rank and all-gathered,
        instead of in full on every rank (split_projections.py). No effect at tensor-parallel
        size 1.
    prefetch: technique 4, the next layer's weights are read ahead while the MLP all-reduce
        runs (GPU: on a side stream; CPU: in a helper thread). Needs communication to hide
        behind, so it only runs at tensor-parallel size > 1 unless ``prefetch_without_comm``
        (prefetch.py).
    cuda_graphs: capture the decode step in a CUDA graph per (batch, tokens) shape (GPU only,
        TP 1; graphs.py).
    moe_form: force one MoE algorithm (kernel_choice.py) instead of choosing by device and size; the
        CPU tests use it to check the GPU's dense form too.
    """

    small_batch_kernels: bool = True
    switch_point: int | None = None  # None: DEFAULT_SWITCH_POINT for the device
    fused_allreduce: bool = True
    split_projections: bool = True
    prefetch: bool = True
    prefetch_without_comm: bool = False
    cuda_graphs: bool = True
    moe_form: str | None = None  # "dense" | "host" | "routed"; None: dense on GPU, by size on CPU
    plant_ordering_bug: bool = False  # tests only: read the fused buffer before the wait

    def __post_init__(self) -> None:
        if self.moe_form not in (None, "dense", "host", "routed"):
            raise ValueError(f"moe_form must be dense, host or routed, got {self.moe_form!r}")

    def switch_point_for(self, device: torch.device) -> int:
        if self.switch_point is not None:
            return self.switch_point
        return DEFAULT_SWITCH_POINT.get(torch.device(device).type, 8)

    def without(self, *techniques: str) -> "LatencyOptions":
        """These options with the named techniques turned off (ablation)."""
        return replace(self, **{name: False for name in techniques})

    @classmethod
    def only(cls, *techniques: str) -> "LatencyOptions":
        """Every switchable part off except the named ones (the engine's per-technique opt-in)."""
        unknown = sorted(set(techniques) - set(SWITCHABLE))
        if unknown:
            raise ValueError(f"unknown latency technique(s) {unknown}; known: {list(SWITCHABLE)}")
        return cls().without(*(name for name in SWITCHABLE if name not in techniques))


ALL_TECHNIQUES = ("small_batch_kernels", "fused_allreduce", "split_projections", "prefetch")
# What the engine and server can turn on one by one: the four techniques and the CUDA-graph step.
SWITCHABLE = (*ALL_TECHNIQUES, "cuda_graphs")
