"""Technique 3: the latent down-projections and the router split across ranks, then gathered.

Stock tensor parallelism replicates ``q_a_proj``, ``kv_a_proj`` and the router: every rank
computes them in full. Here each rank computes one block of their output features (zero-padded
so every rank has the same count) and the blocks are all-gathered in rank order: 1/W of the
weight reads per rank, one gather instead. The gather goes through the fused all-reduce's shared
slots on CPU ranks (fused_allreduce.py) and the library all_gather elsewhere.

Off switch: ``LatencyOptions.split_projections`` (env ``MINIK3_LATENCY_DISABLE=split_projections``).
No effect at tensor-parallel size 1 (nothing to split).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .fused_allreduce import FusedAllReduce

if TYPE_CHECKING:
    from .shards import LatencyShard


def split_rows(weight: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Rank's block of output features (rows), zero-padded so every rank has the same count."""
    rows = weight.shape[0]
    per_rank = -(-rows // world)
    padded = torch.zeros(per_rank * world, *weight.shape[1:], dtype=weight.dtype, device=weight.device)
    padded[:rows] = weight
    return padded[rank * per_rank:(rank + 1) * per_rank].clone()


class SplitProjections:
    """One rank's split latent and router projections (the padding is cut off after the gather)."""

    def __init__(self, transport: FusedAllReduce) -> None:
        self.transport = transport

    def latent(self, h: torch.Tensor, s: LatencyShard, width: int) -> torch.Tensor:
        """``[q_a | c_kv | k_rope]`` of ``h``: ``width`` features, gathered from every rank's slice."""
        return self.transport.linear_all_gather(h, s.qkv_a_slice)[..., :width]

    def router_logits(self, h: torch.Tensor, s: LatencyShard, n_experts: int) -> torch.Tensor:
        return self.transport.linear_all_gather(h, s.router_slice)[..., :n_experts]
