"""One tensor-parallel rank's slice of the mini-K3 weights, for both decode paths.

Stock tensor parallelism (the reference): attention heads are split across ranks (``q_b_proj``
and ``kv_b_proj`` column-parallel by head, ``o_proj`` row-parallel), every expert's hidden
dimension is split (``w1``/``w3`` column-parallel, ``w2`` row-parallel), and the latent
down-projections, the router, norms, embedding and head are REPLICATED: every rank computes them
in full. The latency path adds fused copies: ``q_a_proj`` and ``kv_a_proj`` stacked into one
weight, and for technique 3 each rank's slice of its output features (and of the router's);
``w1``/``w3`` stacked per expert, and all experts side by side for the dense MoE form. Each
layer's latency-path weights live in one flat buffer (``flat``), so the next-layer prefetch
(technique 4) is one read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..model import MoE, MiniK3, SwiGLU


def split_rows(weight: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Rank's block of output features (rows), zero-padded so every rank has the same count."""
    rows = weight.shape[0]
    per_rank = -(-rows // world)
    padded = torch.zeros(per_rank * world, *weight.shape[1:], dtype=weight.dtype, device=weight.device)
    padded[:rows] = weight
    return padded[rank * per_rank:(rank + 1) * per_rank].clone()


def _heads(weight: torch.Tensor, n_heads: int, rank: int, world: int) -> torch.Tensor:
    """Rows of ``weight`` (``[n_heads * per_head, in]``) belonging to this rank's heads."""
    per_head = weight.shape[0] // n_heads
    local = n_heads // world
    return weight.view(n_heads, per_head, -1)[rank * local:(rank + 1) * local].reshape(local * per_head, -1).clone()


def _hidden_shard(mlp: SwiGLU, rank: int, world: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(w1, w3, w2) of this rank: a block of the hidden units."""
    hidden = mlp.w1.weight.shape[0]
    if hidden % world:
        raise ValueError(f"hidden size {hidden} is not divisible by tensor-parallel size {world}")
    per = hidden // world
    part = slice(rank * per, (rank + 1) * per)
    return mlp.w1.weight[part].clone(), mlp.w3.weight[part].clone(), mlp.w2.weight[:, part].clone()


@dataclass
class LayerShard:
    """The weights one rank needs for one layer (stock pieces first, then latency-path fusions)."""

    local_heads: int
    attn_norm: torch.Tensor
    q_a: torch.Tensor
    q_a_norm: torch.Tensor
    q_b: torch.Tensor  # this rank's heads
    kv_a: torch.Tensor
    kv_a_norm: torch.Tensor
    kv_b: torch.Tensor  # this rank's heads
    o: torch.Tensor  # this rank's input columns
    ffn_norm: torch.Tensor
    is_moe: bool
    dense: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # (w1, w3, w2) shard
    router: torch.Tensor | None = None
    shared: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
    experts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = field(default_factory=list)
    # latency-path fusions (views into `flat`)
    qkv_a: torch.Tensor | None = None
    qkv_a_slice: torch.Tensor | None = None
    router_slice: torch.Tensor | None = None
    gate_up: torch.Tensor | None = None  # dense layer: [w1; w3]
    down: torch.Tensor | None = None
    gate_up_all: torch.Tensor | None = None  # MoE: shared then experts, each [w1; w3]
    down_all: torch.Tensor | None = None
    expert_pairs: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)  # (gate_up, down)
    shared_pair: tuple[torch.Tensor, torch.Tensor] | None = None
    expert_hidden: int = 0
    flat: torch.Tensor | None = None


def _pack(shard: LayerShard, names: list[str]) -> None:
    """Move the named latency-path weights into one flat buffer and point the fields at views."""
    tensors = []
    for name in names:
        value = getattr(shard, name)
        if isinstance(value, list):
            tensors.extend(t for pair in value for t in pair)
        elif isinstance(value, tuple):
            tensors.extend(value)
        elif value is not None:
            tensors.append(value)
    flat = torch.cat([t.reshape(-1) for t in tensors])
    views = iter(torch.split(flat, [t.numel() for t in tensors]))

    def view_like(t: torch.Tensor) -> torch.Tensor:
        return next(views).view(t.shape)

    for name in names:
        value = getattr(shard, name)
        if isinstance(value, list):
            setattr(shard, name, [tuple(view_like(t) for t in pair) for pair in value])
        elif isinstance(value, tuple):
            setattr(shard, name, tuple(view_like(t) for t in value))
        elif value is not None:
            setattr(shard, name, view_like(value))
    shard.flat = flat


@torch.no_grad()
def build_shards(model: MiniK3, rank: int, world: int) -> list[LayerShard]:
    """This rank's `LayerShard` for every layer of ``model``."""
    c = model.config
    if c.n_heads % world:
        raise ValueError(f"n_heads {c.n_heads} is not divisible by tensor-parallel size {world}")
    shards = []
    for block in model.layers:
        attn = block.attn
        shard = LayerShard(
            local_heads=c.n_heads // world,
            attn_norm=block.attn_norm.weight.detach(), q_a=attn.q_a_proj.weight.detach(),
            q_a_norm=attn.q_a_norm.weight.detach(), q_b=_heads(attn.q_b_proj.weight, c.n_heads, rank, world),
            kv_a=attn.kv_a_proj.weight.detach(), kv_a_norm=attn.kv_a_norm.weight.detach(),
            kv_b=_heads(attn.kv_b_proj.weight, c.n_heads, rank, world),
            o=attn.o_proj.weight.view(c.d_model, c.n_heads, c.v_head_dim)[:, _head_slice(c.n_heads, rank, world)]
            .reshape(c.d_model, -1).clone(),
            ffn_norm=block.ffn_norm.weight.detach(), is_moe=isinstance(block.mlp, MoE),
        )
        shard.qkv_a = torch.cat([shard.q_a, shard.kv_a])
        shard.qkv_a_slice = split_rows(shard.qkv_a, rank, world)
        if isinstance(block.mlp, MoE):
            shard.router = block.mlp.router.weight.detach()
            shard.router_slice = split_rows(shard.router, rank, world)
            shard.shared = _hidden_shard(block.mlp.shared, rank, world)
            shard.experts = [_hidden_shard(e, rank, world) for e in block.mlp.experts]
            if shard.shared[0].shape[0] != shard.experts[0][0].shape[0]:
                raise ValueError("the dense MoE form needs the shared expert's hidden size to equal the routed ones'")
            shard.expert_hidden = shard.experts[0][0].shape[0]
            shard.shared_pair = (torch.cat([shard.shared[0], shard.shared[1]]), shard.shared[2])
            shard.expert_pairs = [(torch.cat([w1, w3]), w2) for w1, w3, w2 in shard.experts]
            every = [shard.shared_pair, *shard.expert_pairs]
            shard.gate_up_all = torch.cat([gu for gu, _ in every])
            shard.down_all = torch.cat([d for _, d in every], dim=1)
            _pack(shard, ["qkv_a", "qkv_a_slice", "q_b", "kv_b", "o", "router_slice", "gate_up_all", "down_all",
                          "shared_pair", "expert_pairs"])
        else:
            shard.dense = _hidden_shard(block.mlp, rank, world)
            shard.gate_up = torch.cat([shard.dense[0], shard.dense[1]])
            shard.down = shard.dense[2]
            _pack(shard, ["qkv_a", "qkv_a_slice", "q_b", "kv_b", "o", "gate_up", "down"])
        shards.append(shard)
    return shards


def _head_slice(n_heads: int, rank: int, world: int) -> slice:
    local = n_heads // world
    return slice(rank * local, (rank + 1) * local)
