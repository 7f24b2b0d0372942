"""The latency path's weight layout: the stock shard of each layer plus fused copies.

Same split as stock tensor parallelism (tensor_parallel.py: heads, expert hidden units), plus:
``q_a_proj`` and ``kv_a_proj`` stacked into one weight (one product for both latents), and for
technique 3 each rank's slice of their output features and of the router's (split_projections.py);
``w1``/``w3`` stacked per expert (one gate/up product), and all experts side by side for the dense
MoE form (technique 1, kernel_choice.py). Each layer's latency-path weights live in one flat
buffer (``flat``), so technique 4's next-layer prefetch is one read (prefetch.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch

from ..model import MiniK3
from ..tensor_parallel import StockShard, build_stock_shards
from .prefetch import pack_flat
from .split_projections import split_rows

Pair = tuple[torch.Tensor, torch.Tensor]  # (gate_up = [w1; w3], down = w2) of one SwiGLU shard


@dataclass
class LatencyShard(StockShard):
    """A `StockShard` plus the latency path's fused weights (views into ``flat``)."""

    qkv_a: torch.Tensor | None = None  # [q_a; kv_a]
    qkv_a_slice: torch.Tensor | None = None  # technique 3: this rank's rows of qkv_a
    router_slice: torch.Tensor | None = None  # technique 3: this rank's rows of the router
    gate_up: torch.Tensor | None = None  # dense layer: [w1; w3]
    down: torch.Tensor | None = None
    gate_up_all: torch.Tensor | None = None  # MoE, dense form: shared then experts, each [w1; w3]
    down_all: torch.Tensor | None = None
    expert_pairs: list[Pair] = field(default_factory=list)
    shared_pair: Pair | None = None
    expert_hidden: int = 0
    flat: torch.Tensor | None = None  # technique 4: every weight above (and q_b, kv_b, o) in one buffer


@torch.no_grad()
def build_latency_shards(model: MiniK3, rank: int, world: int) -> list[LatencyShard]:
    """This rank's `LatencyShard` for every layer of ``model``."""
    shards = []
    for stock in build_stock_shards(model, rank, world):
        shard = LatencyShard(**{f.name: getattr(stock, f.name) for f in fields(StockShard)})
        shard.qkv_a = torch.cat([shard.q_a, shard.kv_a])
        shard.qkv_a_slice = split_rows(shard.qkv_a, rank, world)
        if shard.is_moe:
            shard.router_slice = split_rows(shard.router, rank, world)
            if shard.shared[0].shape[0] != shard.experts[0][0].shape[0]:
                raise ValueError("the dense MoE form needs the shared expert's hidden size to equal the routed ones'")
            shard.expert_hidden = shard.experts[0][0].shape[0]
            shard.shared_pair = (torch.cat([shard.shared[0], shard.shared[1]]), shard.shared[2])
            shard.expert_pairs = [(torch.cat([w1, w3]), w2) for w1, w3, w2 in shard.experts]
            every = [shard.shared_pair, *shard.expert_pairs]
            shard.gate_up_all = torch.cat([gu for gu, _ in every])
            shard.down_all = torch.cat([d for _, d in every], dim=1)
            pack_flat(shard, ["qkv_a", "qkv_a_slice", "q_b", "kv_b", "o", "router_slice", "gate_up_all", "down_all",
                              "shared_pair", "expert_pairs"])
        else:
            shard.gate_up = torch.cat([shard.dense[0], shard.dense[1]])
            shard.down = shard.dense[2]
            pack_flat(shard, ["qkv_a", "qkv_a_slice", "q_b", "kv_b", "o", "gate_up", "down"])
        shards.append(shard)
    return shards
