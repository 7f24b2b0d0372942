"""One rank's latency-specialised decode step: stock tensor parallelism with the four techniques.

The step is the stock one (tensor_parallel.py: same shards split, same latent attention, same
embedding and head); `LatencyDecoder.layer` replaces the stock layer and composes the techniques,
each behind its own `LatencyOptions` switch:

1. kernel_choice.py: kernels chosen by the step's token count (``small``), fused norms/products;
2. fused_allreduce.py: ``o_proj`` written straight into the shared buffer, one wait, rank-order sum;
3. split_projections.py: the latent and router projections split across ranks and gathered;
4. prefetch.py: the next layer's flat weight buffer read during the feed-forward all-reduce.

graphs.py captures this step in CUDA graphs (GPU, TP 1). Scope as stock: cached decode and
speculative-verify steps (at most ``ABSORBED_MAX_TOKENS`` new tokens per row).
"""

from __future__ import annotations

import torch

from ..model import MiniK3, apply_rope
from ..parallel import RankContext
from ..tensor_parallel import StockDecoder, attend_latent, route
from .fused_allreduce import DEFAULT_MAX_BYTES, FusedAllReduce
from .kernel_choice import is_small_step, linear, moe, moe_form, rms_norm_fused, swiglu_fused
from .options import LatencyOptions
from .prefetch import Prefetcher
from .shards import LatencyShard, build_latency_shards
from .split_projections import SplitProjections


class LatencyDecoder(StockDecoder):
    """Decode steps of one rank on the latency path (``options=None``: every technique on)."""

    path = "latency_specialized"

    def __init__(self, model: MiniK3, ctx: RankContext, options: LatencyOptions | None = None) -> None:
        super().__init__(model, ctx)
        self.options = options = options or LatencyOptions()
        self.shards: list[LatencyShard]
        self.switch_point = options.switch_point_for(ctx.device)
        self.fused = FusedAllReduce.for_rank(ctx) if options.fused_allreduce else None
        use_split = options.split_projections and ctx.distributed
        self.split = SplitProjections(FusedAllReduce.for_rank(ctx)) if use_split else None
        use_prefetch = options.prefetch and (ctx.distributed or options.prefetch_without_comm)
        self.prefetcher = Prefetcher(ctx.device) if use_prefetch else None
        # The shared slots hold one step's widest fp32 partial per rank: model_runner splits larger steps.
        c = model.config
        widest = max(c.d_model, c.q_lora_rank + c.kv_lora_rank + c.qk_rope_head_dim)
        self.max_step_tokens = max(1, DEFAULT_MAX_BYTES // (widest * 4))

    @property
    def techniques(self) -> tuple[str, ...]:
        """The techniques this decoder's steps run (what the engine counts per decode step): an
        option that is on but has nothing to act on here (split projections and prefetch at
        tensor-parallel size 1) is not among them."""
        used = {
            "small_batch_kernels": self.options.small_batch_kernels,
            "fused_allreduce": self.fused is not None,
            "split_projections": self.split is not None,
            "prefetch": self.prefetcher is not None,
        }
        return tuple(name for name, on in used.items() if on)

    def _build_shards(self, model: MiniK3, rank: int, world: int) -> list[LatencyShard]:
        return build_latency_shards(model, rank, world)

    def layer(self, i, x, positions, cos, sin, cache, rows, graph_safe=False) -> torch.Tensor:
        c, s, eps, o, ctx = self.config, self.shards[i], self.config.rms_eps, self.options, self.ctx
        B, T, _ = x.shape
        small = is_small_step(o, B * T, self.switch_point)  # technique 1
        h = rms_norm_fused(x, s.attn_norm, eps)
        latent_width = c.q_lora_rank + c.kv_lora_rank + c.qk_rope_head_dim
        if self.split is not None:  # technique 3
            latent = self.split.latent(h, s, latent_width)
        else:
            latent = linear(h, s.qkv_a, small)
        q_a, c_kv, k_rope = latent.split([c.q_lora_rank, c.kv_lora_rank, c.qk_rope_head_dim], dim=-1)
        q = linear(rms_norm_fused(q_a, s.q_a_norm, eps), s.q_b, small)
        out = self._attend(i, s, q, c_kv, k_rope, positions, cos, sin, cache, rows, graph_safe)
        if self.fused is not None:  # technique 2
            attn = self.fused.linear_all_reduce(out, s.o, plant_ordering_bug=o.plant_ordering_bug)
        else:
            attn = ctx.all_reduce_(linear(out, s.o, small))
        x = x + attn
        h = rms_norm_fused(x, s.ffn_norm, eps).reshape(B * T, -1)
        if not s.is_moe:
            y = swiglu_fused(h, s.gate_up, s.down, small)
        else:
            if self.split is not None:  # technique 3
                logits = self.split.router_logits(h, s, c.n_routed_experts)
            else:
                logits = linear(h, s.router, small)
            expert_ids, weights = route(logits, c.top_k)
            y = moe(moe_form(o, h, small), h, s, expert_ids, weights, c.n_routed_experts, small)
        if self.prefetcher is not None:  # technique 4
            upcoming = self.shards[i + 1].flat if i + 1 < len(self.shards) else None
            y = self.prefetcher.during(upcoming, lambda: ctx.all_reduce_(y))
        else:
            y = ctx.all_reduce_(y)
        return x + y.view(B, T, -1)

    def _attend(self, i, s, q, c_kv, k_rope, positions, cos, sin, cache, rows, graph_safe) -> torch.Tensor:
        """Stock's preparation with fewer operators (same math): one fused norm, and the query and
        key rotary parts rotated together in one `apply_rope`; then the shared `attend_latent`."""
        c = self.config
        B, T = positions.shape
        hl = s.local_heads
        q = q.view(B, T, hl, c.qk_head_dim)
        q_nope, q_rope = q.split([c.qk_nope_head_dim, c.qk_rope_head_dim], dim=-1)
        rotated = apply_rope(torch.cat([q_rope, k_rope[:, :, None, :]], dim=2), cos, sin)
        q_rope, k_rope = rotated[:, :, :hl], rotated[:, :, hl]
        c_kv = rms_norm_fused(c_kv, s.kv_a_norm, c.rms_eps)
        return attend_latent(c, s, i, q_nope, q_rope, c_kv, k_rope, positions, cache, rows, graph_safe)
