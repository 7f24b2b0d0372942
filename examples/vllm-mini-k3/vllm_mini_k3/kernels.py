"""The latency path's replacements for parts of vLLM's DeepSeek-V3 decode step (CPU backend).

Each replacement keeps the stock module's parameters and names (weights load unchanged) and
changes how the step computes; the kernel tests compare each with vLLM's stock module.
Measured per call against stock, fp32, one thread (README, "what pays"):

- `FusedRMSNorm` (fused_norms): vLLM's CPU build routes RMSNorm to its PyTorch-native form
  (~8 operators, the fused-residual form ~10); the CPU `_C.rms_norm` / `_C.fused_add_rms_norm`
  kernels do it in one. 4-8x per norm, 21 norms per step.
- `FusedSoftmaxTopkRouter` (fused_router): DeepSeek's router always takes vLLM's grouped top-k
  (~15 operators); with one group, no score-correction bias, softmax scoring and renormalised
  weights that is the top-k of the logits and a softmax over those k. 6-12x per call.
- `LatencyAttention` (fused_qkv_a): q_a_proj and kv_a_proj_with_mqa read the same input; one
  GEMM (vLLM's own DeepSeekV2FusedQkvAProjLinear, what its MLA path uses) instead of two.
  1.2-2x for the pair.
- `LatencyMoE` (small_batch_moe): batch-size-dependent kernel choice. Up to `small_batch_max_tokens`
  tokens, the router, every routed expert and the shared expert run as two dense GEMMs (router
  logits and all experts' gate/up projections in one, the down projections weighted by the
  routing in the other): more FLOPs than the grouped MoE kernel but a fraction of its fixed
  cost. Above it, vLLM's stock fused-MoE path. 2.1-2.3x at 1-4 tokens, 1.5x at 8, 1.08x at 16,
  0.84x at 32 (fp32); bf16 gains up to 64 tokens but the threshold is kept at 32.
"""

from __future__ import annotations

from typing import Any

import torch

from vllm.model_executor.layers.fused_moe.router.cpu_router import CPURouter
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.model_executor.layers.linear import ReplicatedLinear
from vllm.model_executor.models.deepseek_v2 import (
    DeepseekV2Attention,
    DeepseekV2MoE,
    DeepSeekV2FusedQkvAProjLinear,
)

# tokens per step up to which the small-batch MoE kernel runs, by dtype (measured crossover)
SMALL_BATCH_MAX_TOKENS = {torch.float32: 16, torch.bfloat16: 32}


class FusedRMSNorm(RMSNorm):
    """RMSNorm through vLLM's fused CPU kernels (the residual add fused in place, as on GPU)."""

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> Any:
        if residual is None:
            out = torch.empty(x.shape, dtype=x.dtype)
            torch.ops._C.rms_norm(out, x.contiguous(), self.weight, self.variance_epsilon)
            return out
        torch.ops._C.fused_add_rms_norm(x, residual, self.weight, self.variance_epsilon)
        return x, residual

    @staticmethod
    def applies_to(norm: torch.nn.Module) -> bool:
        return type(norm) is RMSNorm and norm.has_weight and norm.variance_size_override is None


def fused_softmax_topk(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Renormalised softmax top-k: a softmax over the k largest logits (fp32 weights, int32 ids)."""
    values, ids = torch.topk(logits.float(), top_k, dim=-1)
    return torch.softmax(values, dim=-1), ids.to(torch.int32)


class FusedSoftmaxTopkRouter(CPURouter):
    """CPURouter whose grouped top-k is, for the configurations of `applies_to`, two operators."""

    def _compute_routing(self, hidden_states: torch.Tensor, router_logits: torch.Tensor,
                         indices_type: torch.dtype | None, *, input_ids: torch.Tensor | None = None,
                         ) -> tuple[torch.Tensor, torch.Tensor]:
        return fused_softmax_topk(router_logits, self.top_k)

    @staticmethod
    def applies_to(router: object) -> bool:
        """One expert group, softmax scoring, renormalised, unscaled, no correction bias."""
        return (type(router) is CPURouter and router.use_grouped_topk and router.num_expert_group == 1
                and router.scoring_func == "softmax" and router.renormalize
                and router.routed_scaling_factor == 1.0 and router.e_score_correction_bias is None
                and router.custom_routing_function is None)


class LatencyAttention(DeepseekV2Attention):
    """DeepseekV2Attention (decompressed, VLLM_MLA_DISABLE=1) with q_a and kv_a in one GEMM."""

    @classmethod
    def install(cls, attn: DeepseekV2Attention, prefix: str) -> None:
        attn.fused_qkv_a_proj = DeepSeekV2FusedQkvAProjLinear(
            attn.hidden_size, [attn.q_lora_rank, attn.kv_lora_rank + attn.qk_rope_head_dim],
            quant_config=None, prefix=f"{prefix}.fused_qkv_a_proj",
        )
        # the checkpoint's q_a_proj / kv_a_proj_with_mqa load into it (vLLM's stacked mapping)
        del attn.q_a_proj, attn.kv_a_proj_with_mqa
        attn.__class__ = cls

    @staticmethod
    def applies_to(attn: torch.nn.Module) -> bool:
        return type(attn) is DeepseekV2Attention and attn.q_lora_rank is not None

    def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor,
                llama_4_scaling: torch.Tensor | None) -> torch.Tensor:
        # From here to the end: DeepseekV2Attention.forward with the two A projections fused.
        qkv_a = self.fused_qkv_a_proj(hidden_states)[0]
        q, latent_cache = qkv_a.split([self.q_lora_rank, self.kv_lora_rank + self.qk_rope_head_dim], dim=-1)
        q = self.q_a_layernorm(q)
        q = self.q_b_proj(q)[0].view(-1, self.num_local_heads, self.qk_head_dim)
        q_nope, q_pe = q.split([self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)
        kv_a, _ = latent_cache.split([self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        latent_cache = latent_cache.unsqueeze(1)
        kv_a = self.kv_a_layernorm(kv_a)
        kv = self.kv_b_proj(kv_a)[0]
        kv = kv.view(-1, self.num_local_heads, self.qk_nope_head_dim + self.v_head_dim)
        k_nope, v = kv.split([self.qk_nope_head_dim, self.v_head_dim], dim=-1)
        k_pe = latent_cache[:, :, self.kv_lora_rank:]
        q_pe, k_pe = self.rotary_emb(positions, q_pe, k_pe)
        q[..., self.qk_nope_head_dim:] = q_pe
        k = torch.empty_like(q)
        k[..., : self.qk_nope_head_dim] = k_nope
        k[..., self.qk_nope_head_dim:] = k_pe
        if llama_4_scaling is not None:
            q *= llama_4_scaling
        v = torch.nn.functional.pad(v, [0, self.qk_head_dim - self.v_head_dim], value=0).view(
            -1, self.num_local_heads * self.qk_head_dim)
        attn_output = self.attn(q, k, v)
        attn_output = attn_output.view(-1, self.num_local_heads, self.qk_head_dim)[..., : self.v_head_dim].reshape(
            -1, self.num_local_heads * self.v_head_dim)
        output, _ = self.o_proj(attn_output)
        return output


class LatencyMoE(DeepseekV2MoE):
    """DeepseekV2MoE with a dense small-batch kernel below `small_batch_max_tokens` tokens.

    ``small_up`` holds ``[router | expert 0 gate | expert 0 up | ... | shared gate | shared up]``
    rows and ``small_down`` every expert's down projection side by side, the shared expert last;
    both are filled from the checkpoint by `load_small_batch_weights` and packed by vLLM's CPU
    linear dispatch like any other linear layer.
    """

    small_batch_max_tokens: int
    top_k: int
    fault_batch3: bool

    @classmethod
    def install(cls, moe: DeepseekV2MoE, config: Any, dtype: torch.dtype, prefix: str, fault_batch3: bool) -> None:
        e, inter, hidden = config.n_routed_experts, config.moe_intermediate_size, config.hidden_size
        moe.small_up = ReplicatedLinear(hidden, e + (e + 1) * 2 * inter, bias=False, prefix=f"{prefix}.small_up")
        moe.small_down = ReplicatedLinear((e + 1) * inter, hidden, bias=False, prefix=f"{prefix}.small_down")
        moe.small_batch_max_tokens = SMALL_BATCH_MAX_TOKENS.get(dtype, 16)
        moe.top_k = config.num_experts_per_tok
        moe.fault_batch3 = fault_batch3
        moe.__class__ = cls

    @staticmethod
    def applies_to(moe: torch.nn.Module, config: Any) -> bool:
        """One shared expert as wide as a routed one, renormalised softmax routing, unscaled."""
        return (type(moe) is DeepseekV2MoE and config.n_shared_experts == 1 and moe.shared_experts is not None
                and moe.tp_size == 1 and not moe.enable_eplb and moe.routed_scaling_factor == 1.0
                and moe.gate.e_score_correction_bias is None and config.norm_topk_prob
                and getattr(config, "scoring_func", "softmax") == "softmax"
                and getattr(config, "n_group", 1) == 1)

    def load_small_batch_weights(self, layer_prefix: str, weights: dict[str, torch.Tensor]) -> set[str]:
        """Fill small_up / small_down from the checkpoint tensors of this layer's MoE."""
        e = self.n_routed_experts
        up_rows = [weights[f"{layer_prefix}.gate.weight"]]
        down_cols = []
        for name in [f"experts.{j}" for j in range(e)] + ["shared_experts"]:
            up_rows += [weights[f"{layer_prefix}.{name}.gate_proj.weight"], weights[f"{layer_prefix}.{name}.up_proj.weight"]]
            down_cols.append(weights[f"{layer_prefix}.{name}.down_proj.weight"])
        with torch.no_grad():
            self.small_up.weight.copy_(torch.cat(up_rows))
            self.small_down.weight.copy_(torch.cat(down_cols, dim=1))
        return {f"{layer_prefix}.small_up.weight", f"{layer_prefix}.small_down.weight"}

    def forward(self, hidden_states: torch.Tensor, already_sequence_parallel: bool = False) -> torch.Tensor:
        if hidden_states.shape[0] > self.small_batch_max_tokens:
            return super().forward(hidden_states, already_sequence_parallel)
        return self.small_batch(hidden_states)

    def small_batch(self, x: torch.Tensor) -> torch.Tensor:
        n, e, k = x.shape[0], self.n_routed_experts, self.top_k
        h = self.small_up(x)[0]
        logits, h = h.split([e, h.shape[1] - e], dim=-1)
        if self.fault_batch3 and n == 3:  # planted fault: unnormalised probabilities
            probs = torch.softmax(logits.float(), dim=-1)
            weights, ids = probs.topk(k, dim=-1)
        else:
            weights, ids = fused_softmax_topk(logits, k)
        gates = torch.zeros(n, e + 1, dtype=x.dtype)
        gates.scatter_(1, ids.long(), weights.to(x.dtype))
        gates[:, e] = 1.0  # the shared expert
        inter = h.shape[1] // (2 * (e + 1))
        act = torch.empty(n, e + 1, inter, dtype=x.dtype)
        # the CPU silu_and_mul kernel ignores strides: the rows of h are views into the GEMM output
        torch.ops._C.silu_and_mul(act, h.contiguous().view(n, e + 1, 2 * inter))
        act.mul_(gates.unsqueeze(-1))
        return self.small_down(act.view(n, -1))[0]
