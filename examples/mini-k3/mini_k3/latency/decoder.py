"""One rank's decode step over its weight shards: the stock tensor-parallel path and the
latency-specialised path (the four techniques, each behind its own `LatencyOptions` switch).

Scope: cached decode and speculative-verify steps (at most ``ABSORBED_MAX_TOKENS`` new tokens
per row, attention in the latent space). Prefill is not part of the decode path: callers prefill
with the model's own forward (every rank holds the full model; the latent cache is replicated).
At tensor-parallel size 1 the stock path IS the model's own forward, bit for bit.
"""

from __future__ import annotations

import math
from concurrent.futures import Future, ThreadPoolExecutor

import torch
import torch.nn.functional as F

from ..fused_allreduce import FusedAllReduce
from ..model import ABSORBED_MAX_TOKENS, KVCache, MiniK3, apply_rope, rope_cos_sin
from ..parallel import RankContext
from .kernels import linear, moe_dense, moe_grouped_on_host, moe_routed, rms_norm, rms_norm_fused, route, swiglu_fused
from .options import LatencyOptions
from .shards import LayerShard, build_shards


class Prefetcher:
    """Technique 4: read the next layer's flat weight buffer while communication runs.

    GPU: one reduction kernel over the buffer on a side stream (pulls it into L2), ordered after
    the main stream's work so far and joined back with an event. CPU: a helper thread sums the
    buffer (pulls it into the caches) while the rank waits in the all-reduce; the effect is small
    on CPU (the buffers are a few hundred KB) and is measured, not assumed, in the benchmark.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._future: Future | None = None
        if device.type == "cuda":
            self.stream = torch.cuda.Stream(device)
            self.event = torch.cuda.Event()
            self.sink = torch.zeros((), device=device, dtype=torch.float32)
        else:
            self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minik3-prefetch")

    def start(self, flat: torch.Tensor) -> None:
        if self.device.type == "cuda":
            self.stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self.stream):
                # the full reduction has no out= overload; dim=0 of the flat buffer does (no allocation)
                torch.sum(flat, dim=0, dtype=torch.float32, out=self.sink)
                self.event.record(self.stream)
        else:
            self._future = self.pool.submit(lambda: float(flat.sum()))

    def wait(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).wait_event(self.event)
        elif self._future is not None:
            self._future.result()
            self._future = None


class ShardedDecoder:
    """Decode steps for one rank. ``options=None``: stock tensor parallelism; else the latency path."""

    def __init__(self, model: MiniK3, ctx: RankContext, options: LatencyOptions | None = None) -> None:
        self.model = model
        self.config = model.config
        self.ctx = ctx
        self.options = options
        self.shards: list[LayerShard] = build_shards(model, ctx.rank, ctx.world_size)
        self.fused = FusedAllReduce.for_rank(ctx) if options is not None and options.fused_allreduce else None
        # technique 3's transport: the shared slots on CPU ranks, the library all_gather elsewhere
        use_split = options is not None and options.split_projections and ctx.distributed
        self.gather = FusedAllReduce.for_rank(ctx) if use_split else None
        use_prefetch = options is not None and options.prefetch and (ctx.distributed or options.prefetch_without_comm)
        self.prefetcher = Prefetcher(ctx.device) if use_prefetch else None
        self.switch_point = options.switch_point_for(ctx.device) if options is not None else 0

    @property
    def path(self) -> str:
        return "stock" if self.options is None else "latency_specialized"

    # ---- the step ---------------------------------------------------------------------------
    @torch.no_grad()
    def forward(self, ids: torch.Tensor, positions: torch.Tensor, cache: KVCache,
                cache_rows: torch.Tensor | None = None, graph_safe: bool = False) -> torch.Tensor:
        """Logits ``[B, T, V]`` for ``T <= ABSORBED_MAX_TOKENS`` new tokens per row, cache updated.

        ``graph_safe``: no host synchronisation (attends over the whole cache with a mask), so the
        step can be captured in a CUDA graph.
        """
        B, T = ids.shape
        if T > ABSORBED_MAX_TOKENS:
            raise ValueError(f"a decode step takes at most {ABSORBED_MAX_TOKENS} tokens per row, got {T}")
        if cache_rows is None:
            cache_rows = torch.arange(B, device=ids.device)
        if self.options is None and not self.ctx.distributed:
            return self.model(ids, positions, cache, cache_rows)
        x = self.forward_layers(self.model.embed(ids), positions, cache, cache_rows, graph_safe)
        return F.linear(rms_norm(x, self.model.norm.weight, self.config.rms_eps), self.model.lm_head.weight)

    def forward_layers(self, x: torch.Tensor, positions: torch.Tensor, cache: KVCache, cache_rows: torch.Tensor,
                       graph_safe: bool = False) -> torch.Tensor:
        cos, sin = rope_cos_sin(positions, self.config.qk_rope_head_dim, self.config.rope_theta)
        for i in range(len(self.shards)):
            if self.options is None:
                x = self.stock_layer(i, x, positions, cos, sin, cache, cache_rows, graph_safe)
            else:
                x = self.latency_layer(i, x, positions, cos, sin, cache, cache_rows, graph_safe)
        return x

    # ---- stock tensor parallelism -------------------------------------------------------------
    def stock_layer(self, i, x, positions, cos, sin, cache, rows, graph_safe=False) -> torch.Tensor:
        c, s, eps = self.config, self.shards[i], self.config.rms_eps
        B, T, _ = x.shape
        h = rms_norm(x, s.attn_norm, eps)
        q = F.linear(rms_norm(F.linear(h, s.q_a), s.q_a_norm, eps), s.q_b)
        c_kv, k_rope = F.linear(h, s.kv_a).split([c.kv_lora_rank, c.qk_rope_head_dim], dim=-1)
        out = self._attend(i, s, q, c_kv, k_rope, positions, cos, sin, cache, rows, graph_safe)
        x = x + self.ctx.all_reduce_(F.linear(out, s.o))
        h = rms_norm(x, s.ffn_norm, eps)
        if not s.is_moe:
            w1, w3, w2 = s.dense
            y = F.linear(F.silu(F.linear(h, w1)) * F.linear(h, w3), w2)
        else:
            y = self._stock_moe(s, h)
        return x + self.ctx.all_reduce_(y)

    def _stock_moe(self, s: LayerShard, h: torch.Tensor) -> torch.Tensor:
        flat = h.reshape(-1, h.shape[-1])
        expert_ids, weights = route(flat, F.linear(flat, s.router), self.config.top_k)
        w1, w3, w2 = s.shared
        out = F.linear(F.silu(F.linear(flat, w1)) * F.linear(flat, w3), w2)
        routed = torch.zeros_like(flat)
        for e, (w1, w3, w2) in enumerate(s.experts):
            token_idx, slot = (expert_ids == e).nonzero(as_tuple=True)
            if token_idx.numel() == 0:
                continue
            xe = flat[token_idx]
            y = F.linear(F.silu(F.linear(xe, w1)) * F.linear(xe, w3), w2) * weights[token_idx, slot, None].to(h.dtype)
            routed.index_add_(0, token_idx, y)
        return (out + routed).view(h.shape)

    # ---- the latency-specialised path ---------------------------------------------------------
    def latency_layer(self, i, x, positions, cos, sin, cache, rows, graph_safe=False) -> torch.Tensor:
        c, s, eps, o, ctx = self.config, self.shards[i], self.config.rms_eps, self.options, self.ctx
        B, T, _ = x.shape
        small = o.small_batch_kernels and B * T <= self.switch_point
        split = o.split_projections and ctx.distributed
        h = rms_norm_fused(x, s.attn_norm, eps)
        latent_width = c.q_lora_rank + c.kv_lora_rank + c.qk_rope_head_dim
        if split:  # technique 3: each rank computes its slice of the latent features
            latent = self.gather.linear_all_gather(h, s.qkv_a_slice)[..., :latent_width]
        else:
            latent = linear(h, s.qkv_a, small)
        q_a, c_kv, k_rope = latent.split([c.q_lora_rank, c.kv_lora_rank, c.qk_rope_head_dim], dim=-1)
        q = linear(rms_norm_fused(q_a, s.q_a_norm, eps), s.q_b, small)
        out = self._attend(i, s, q, c_kv, k_rope, positions, cos, sin, cache, rows, graph_safe, lean=True)
        if self.fused is not None:  # technique 2
            attn = self.fused.linear_all_reduce(out, s.o, plant_ordering_bug=o.plant_ordering_bug)
        else:
            attn = ctx.all_reduce_(linear(out, s.o, small))
        x = x + attn
        h = rms_norm_fused(x, s.ffn_norm, eps).reshape(B * T, -1)
        if not s.is_moe:
            y = swiglu_fused(h, s.gate_up, s.down, small)
        else:
            if split:
                logits = self.gather.linear_all_gather(h, s.router_slice)[..., :c.n_routed_experts]
            else:
                logits = linear(h, s.router, small)
            expert_ids, weights = route(h, logits, c.top_k)
            form = o.moe_form or ("dense" if h.is_cuda else "host" if small else "routed")
            if form == "dense":  # no host sync: capturable in a CUDA graph
                y = moe_dense(h, s.gate_up_all, s.down_all, expert_ids, weights, c.n_routed_experts,
                              s.expert_hidden, small)
            elif form == "host":
                y = moe_grouped_on_host(h, s.shared_pair, s.expert_pairs, expert_ids, weights)
            else:
                y = moe_routed(h, s.shared_pair, s.expert_pairs, expert_ids, weights)
        if self.prefetcher is not None and i + 1 < len(self.shards):  # technique 4
            self.prefetcher.start(self.shards[i + 1].flat)
        y = ctx.all_reduce_(y)
        if self.prefetcher is not None and i + 1 < len(self.shards):
            self.prefetcher.wait()
        return x + y.view(B, T, -1)

    # ---- attention in the latent space (both paths) -------------------------------------------
    def _attend(self, i, s, q, c_kv, k_rope, positions, cos, sin, cache, rows, graph_safe,
                lean: bool = False) -> torch.Tensor:
        """``lean`` (latency path): one fused norm, and the query and key rotary parts rotated
        together in one `apply_rope` (same math, half the operators)."""
        c, eps = self.config, self.config.rms_eps
        B, T = positions.shape
        hl = s.local_heads
        q = q.view(B, T, hl, c.qk_head_dim)
        q_nope, q_rope = q.split([c.qk_nope_head_dim, c.qk_rope_head_dim], dim=-1)
        if lean:
            rotated = apply_rope(torch.cat([q_rope, k_rope[:, :, None, :]], dim=2), cos, sin)
            q_rope, k_rope = rotated[:, :, :hl], rotated[:, :, hl]
            c_kv = rms_norm_fused(c_kv, s.kv_a_norm, eps)
        else:
            q_rope = apply_rope(q_rope, cos, sin)
            c_kv = rms_norm(c_kv, s.kv_a_norm, eps)
            k_rope = apply_rope(k_rope[:, :, None, :], cos, sin)[:, :, 0, :]
        cache_c, cache_r = cache.c_kv[i], cache.k_rope[i]
        slot_rows = rows[:, None].expand_as(positions)
        cache_c[slot_rows, positions] = c_kv.to(cache_c.dtype)
        cache_r[slot_rows, positions] = k_rope.to(cache_r.dtype)
        span = cache.max_len if graph_safe else int(positions.max()) + 1
        keys_c = cache_c[rows, :span].to(q.dtype)
        keys_r = cache_r[rows, :span].to(q.dtype)
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
