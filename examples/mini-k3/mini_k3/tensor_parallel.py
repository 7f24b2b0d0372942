"""Stock tensor parallelism for mini-K3's decode step: one rank's weight shards and its step.

This is what runs at tensor-parallel size > 1 with the ``latency_specialized`` switch off
(model_runner.py), and the reference the latency path (mini_k3/latency/) is checked against. It
imports nothing from mini_k3/latency: with the switch off, none of that code runs.

Layout (Megatron-style): attention heads are split across ranks (``q_b_proj`` and ``kv_b_proj``
column-parallel by head, ``o_proj`` row-parallel), every expert's hidden dimension is split
(``w1``/``w3`` column-parallel, ``w2`` row-parallel), and the latent down-projections, the router,
norms, embedding and head are REPLICATED: every rank computes them in full. Two library
all-reduces per layer (gloo / NCCL): after ``o_proj`` and after the feed-forward.

Scope: cached decode and speculative-verify steps (at most ``ABSORBED_MAX_TOKENS`` new tokens per
row, attention in the latent space). Prefill is not part of the decode path: callers prefill with
the model's own forward (every rank holds the full model; the latent cache is replicated). At
tensor-parallel size 1 the stock step IS the model's own forward, bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .config import MiniK3Config
from .model import ABSORBED_MAX_TOKENS, KVCache, MiniK3, MoE, SwiGLU, apply_rope, rope_cos_sin
from .parallel import RankContext

Weights3 = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # (w1, w3, w2) of one SwiGLU shard


# ---- the model's math as functions (same float32 steps, so the same bits) ---------------------
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The model's RMSNorm."""
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return (x32 * weight.float()).to(x.dtype)


def route(router_logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's routing (softmax in float32, top-k, renormalised): (expert ids, weights)."""
    probs = torch.softmax(router_logits.float(), dim=-1)
    top_w, top_i = probs.topk(top_k, dim=-1)
    return top_i, top_w / top_w.sum(-1, keepdim=True)


def swiglu(x: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)


def stock_linear_all_reduce(ctx: RankContext, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """A row-parallel projection: private partial, then the library all-reduce."""
    return ctx.all_reduce_(F.linear(x, weight))


# ---- the shard layout -------------------------------------------------------------------------
def head_slice(n_heads: int, rank: int, world: int) -> slice:
    local = n_heads // world
    return slice(rank * local, (rank + 1) * local)


def head_rows(weight: torch.Tensor, n_heads: int, rank: int, world: int) -> torch.Tensor:
    """Rows of ``weight`` (``[n_heads * per_head, in]``) belonging to this rank's heads."""
    per_head = weight.shape[0] // n_heads
    local = n_heads // world
    return weight.view(n_heads, per_head, -1)[rank * local:(rank + 1) * local].reshape(local * per_head, -1).clone()


def hidden_shard(mlp: SwiGLU, rank: int, world: int) -> Weights3:
    """(w1, w3, w2) of this rank: a block of the hidden units."""
    hidden = mlp.w1.weight.shape[0]
    if hidden % world:
        raise ValueError(f"hidden size {hidden} is not divisible by tensor-parallel size {world}")
    per = hidden // world
    part = slice(rank * per, (rank + 1) * per)
    return mlp.w1.weight[part].clone(), mlp.w3.weight[part].clone(), mlp.w2.weight[:, part].clone()


@dataclass
class StockShard:
    """The weights one rank needs for one layer of the stock step."""

    local_heads: int
    attn_norm: torch.Tensor
    q_a: torch.Tensor  # replicated
    q_a_norm: torch.Tensor
    q_b: torch.Tensor  # this rank's heads
    kv_a: torch.Tensor  # replicated
    kv_a_norm: torch.Tensor
    kv_b: torch.Tensor  # this rank's heads
    o: torch.Tensor  # this rank's input columns
    ffn_norm: torch.Tensor
    is_moe: bool
    dense: Weights3 | None = None
    router: torch.Tensor | None = None  # replicated
    shared: Weights3 | None = None
    experts: list[Weights3] = field(default_factory=list)


@torch.no_grad()
def build_stock_shards(model: MiniK3, rank: int, world: int) -> list[StockShard]:
    """This rank's `StockShard` for every layer of ``model``."""
    c = model.config
    if c.n_heads % world:
        raise ValueError(f"n_heads {c.n_heads} is not divisible by tensor-parallel size {world}")
    shards = []
    for block in model.layers:
        attn = block.attn
        shard = StockShard(
            local_heads=c.n_heads // world,
            attn_norm=block.attn_norm.weight.detach(), q_a=attn.q_a_proj.weight.detach(),
            q_a_norm=attn.q_a_norm.weight.detach(), q_b=head_rows(attn.q_b_proj.weight, c.n_heads, rank, world),
            kv_a=attn.kv_a_proj.weight.detach(), kv_a_norm=attn.kv_a_norm.weight.detach(),
            kv_b=head_rows(attn.kv_b_proj.weight, c.n_heads, rank, world),
            o=attn.o_proj.weight.view(c.d_model, c.n_heads, c.v_head_dim)[:, head_slice(c.n_heads, rank, world)]
            .reshape(c.d_model, -1).clone(),
            ffn_norm=block.ffn_norm.weight.detach(), is_moe=isinstance(block.mlp, MoE),
        )
        if isinstance(block.mlp, MoE):
            shard.router = block.mlp.router.weight.detach()
            shard.shared = hidden_shard(block.mlp.shared, rank, world)
            shard.experts = [hidden_shard(e, rank, world) for e in block.mlp.experts]
        else:
            shard.dense = hidden_shard(block.mlp, rank, world)
        shards.append(shard)
    return shards


# ---- attention in the latent space (shared by both decode paths) ------------------------------
def attend_latent(c: MiniK3Config, s: StockShard, i: int, q_nope: torch.Tensor, q_rope: torch.Tensor,
                  c_kv: torch.Tensor, k_rope: torch.Tensor, positions: torch.Tensor, cache: KVCache,
                  rows: torch.Tensor, graph_safe: bool) -> torch.Tensor:
    """Write the step's latents into layer ``i`` of the cache, attend over it with the key/value
    up-projections absorbed into the query and output; this rank's heads, ``[B, T, heads * v]``.

    ``c_kv`` is normalised and ``q_rope``/``k_rope`` rotated already. ``graph_safe``: attend over
    the whole cache with a mask (no host read of the longest position), for CUDA graph capture.
    """
    B, T = positions.shape
    hl = s.local_heads
    cache_c, cache_r = cache.c_kv[i], cache.k_rope[i]
    slot_rows = rows[:, None].expand_as(positions)
    cache_c[slot_rows, positions] = c_kv.to(cache_c.dtype)
    cache_r[slot_rows, positions] = k_rope.to(cache_r.dtype)
    span = cache.max_len if graph_safe else int(positions.max()) + 1
    keys_c = cache_c[rows, :span].to(q_nope.dtype)
    keys_r = cache_r[rows, :span].to(q_nope.dtype)
    mask = torch.arange(span, device=positions.device)[None, None, :] <= positions[:, :, None]
    w = s.kv_b.view(hl, c.qk_nope_head_dim + c.v_head_dim, c.kv_lora_rank)
    w_uk, w_uv = w[:, : c.qk_nope_head_dim], w[:, c.qk_nope_head_dim:]
    q_latent = torch.einsum("bthn,hnc->bthc", q_nope, w_uk)
    scores = torch.einsum("bthc,bsc->bhts", q_latent, keys_c) + torch.einsum("bthr,bsr->bhts", q_rope, keys_r)
    scores = scores.float() * (1.0 / math.sqrt(c.qk_head_dim))
    scores = scores.masked_fill(~mask[:, None, :, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(keys_c.dtype)
    out_latent = torch.einsum("bhts,bsc->bthc", probs, keys_c)
    out = torch.einsum("bthc,hvc->bthv", out_latent, w_uv)
    return out.reshape(B, T, hl * c.v_head_dim)


# ---- the step ---------------------------------------------------------------------------------
class StockDecoder:
    """One rank's decode step with stock tensor parallelism."""

    path = "stock"
    # Rows x tokens one `forward` may take (None: any); model_runner splits larger steps.
    max_step_tokens: int | None = None

    def __init__(self, model: MiniK3, ctx: RankContext) -> None:
        self.model = model
        self.config = model.config
        self.ctx = ctx
        self.shards = self._build_shards(model, ctx.rank, ctx.world_size)

    def _build_shards(self, model: MiniK3, rank: int, world: int) -> list:
        return build_stock_shards(model, rank, world)

    @torch.no_grad()
    def forward(self, ids: torch.Tensor, positions: torch.Tensor, cache: KVCache,
                cache_rows: torch.Tensor | None = None, graph_safe: bool = False) -> torch.Tensor:
        """Logits ``[B, T, V]`` for ``T <= ABSORBED_MAX_TOKENS`` new tokens per row, cache updated.

        ``graph_safe``: no host synchronisation, so the step can be captured in a CUDA graph.
        """
        B, T = ids.shape
        if T > ABSORBED_MAX_TOKENS:
            raise ValueError(f"a decode step takes at most {ABSORBED_MAX_TOKENS} tokens per row, got {T}")
        if cache_rows is None:
            cache_rows = torch.arange(B, device=ids.device)
        if self.path == "stock" and not self.ctx.distributed:
            return self.model(ids, positions, cache, cache_rows)  # TP 1: nothing to shard
        x = self.forward_layers(self.model.embed(ids), positions, cache, cache_rows, graph_safe)
        return F.linear(rms_norm(x, self.model.norm.weight, self.config.rms_eps), self.model.lm_head.weight)

    def forward_layers(self, x: torch.Tensor, positions: torch.Tensor, cache: KVCache, cache_rows: torch.Tensor,
                       graph_safe: bool = False) -> torch.Tensor:
        cos, sin = rope_cos_sin(positions, self.config.qk_rope_head_dim, self.config.rope_theta)
        for i in range(len(self.shards)):
            x = self.layer(i, x, positions, cos, sin, cache, cache_rows, graph_safe)
        return x

    def layer(self, i, x, positions, cos, sin, cache, rows, graph_safe=False) -> torch.Tensor:
        c, s, eps = self.config, self.shards[i], self.config.rms_eps
        h = rms_norm(x, s.attn_norm, eps)
        q = F.linear(rms_norm(F.linear(h, s.q_a), s.q_a_norm, eps), s.q_b)
        c_kv, k_rope = F.linear(h, s.kv_a).split([c.kv_lora_rank, c.qk_rope_head_dim], dim=-1)
        out = self._attend(i, s, q, c_kv, k_rope, positions, cos, sin, cache, rows, graph_safe)
        x = x + stock_linear_all_reduce(self.ctx, out, s.o)
        h = rms_norm(x, s.ffn_norm, eps)
        y = self._moe(s, h) if s.is_moe else swiglu(h, *s.dense)
        return x + self.ctx.all_reduce_(y)

    def _moe(self, s: StockShard, h: torch.Tensor) -> torch.Tensor:
        """The shared expert on every token, each routed expert on its tokens only (as the model)."""
        flat = h.reshape(-1, h.shape[-1])
        expert_ids, weights = route(F.linear(flat, s.router), self.config.top_k)
        out = swiglu(flat, *s.shared)
        routed = torch.zeros_like(flat)
        for e, (w1, w3, w2) in enumerate(s.experts):
            token_idx, slot = (expert_ids == e).nonzero(as_tuple=True)
            if token_idx.numel() == 0:
                continue
            y = swiglu(flat[token_idx], w1, w3, w2) * weights[token_idx, slot, None].to(h.dtype)
            routed.index_add_(0, token_idx, y)
        return (out + routed).view(h.shape)

    def _attend(self, i, s, q, c_kv, k_rope, positions, cos, sin, cache, rows, graph_safe) -> torch.Tensor:
        """The model's query/key preparation (norm, rotary parts), then `attend_latent`."""
        c = self.config
        B, T = positions.shape
        q = q.view(B, T, s.local_heads, c.qk_head_dim)
        q_nope, q_rope = q.split([c.qk_nope_head_dim, c.qk_rope_head_dim], dim=-1)
        q_rope = apply_rope(q_rope, cos, sin)
        c_kv = rms_norm(c_kv, s.kv_a_norm, c.rms_eps)
        k_rope = apply_rope(k_rope[:, :, None, :], cos, sin)[:, :, 0, :]
        return attend_latent(c, s, i, q_nope, q_rope, c_kv, k_rope, positions, cache, rows, graph_safe)
