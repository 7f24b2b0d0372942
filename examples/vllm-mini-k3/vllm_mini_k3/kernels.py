"""The latency path's replacements for parts of vLLM's DeepSeek-V3 decode step (CPU backend).

Each replacement keeps the stock module's parameters and names (weights load unchanged) and
changes how the step computes; the kernel tests compare each with vLLM's stock module.
What each buys for a whole decode step (scripts/step_bench.py, in-process, fp32, one thread,
against the plugin's class with every technique off; results/step_bench_fp32.json):

| technique | batch 1 | 4 | 8 | 16 | 32 | 64 |
|---|---|---|---|---|---|---|
| fused_norms | 1.28x | 1.24x | 1.22x | 1.20x | 1.15x | 1.12x |
| fused_router | 1.06x | 1.06x | 1.05x | 1.05x | 1.04x | 1.08x |
| small_batch_moe | (off) | 1.19x | 1.16x | 1.06x | (off) | (off) |

- `FusedRMSNorm` (fused_norms): vLLM's CPU build routes RMSNorm to its PyTorch-native form
  (~8 operators, the fused-residual form ~10); vLLM's CPU `_C.rms_norm` / `_C.fused_add_rms_norm`
  kernels do it in one (its IR registers them for GPUs only). 21 norms per step.
- `FusedSoftmaxTopkRouter` (fused_router): DeepSeek's router always takes vLLM's grouped top-k
  (~15 operators); with one group, no score-correction bias, softmax scoring and renormalised
  weights that is the top-k of the logits and a softmax over those k: 2 operators.
- `LatencyMoE` (small_batch_moe): batch-size-dependent kernel choice. From 2 to
  `small_batch_max_tokens` tokens the router, every routed expert and the shared expert run as two
  dense GEMMs (router logits and all experts' gate/up projections in one, the down projections
  weighted by the routing in the other): more FLOPs than vLLM's grouped MoE kernel but a
  fraction of its fixed cost. One token stays on the grouped kernel: the dense form reads every
  expert's weights, which in a whole step (weights no longer in cache) cost what it saved (0.99x);
  a one-token path reading only its k experts through GEMVs was slower still. Above 16 tokens
  (fp32) the dense FLOPs lose (0.84x at 32 for the MoE alone).

Left out, measured: q_a_proj and kv_a_proj_with_mqa fused into one GEMM (what vLLM's MLA path
does) halved that pair's time alone but moved a whole step by 0.99-1.01x; a fused SiLU-and-mul
in the dense MLP gained 1.17x for the MLP at one token and lost at 64 (0.94x).
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.model_executor.layers.fused_moe.router.cpu_router import CPURouter
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.model_executor.layers.linear import ReplicatedLinear
from vllm.model_executor.models.deepseek_v2 import DeepseekV2MoE

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
        if not 2 <= hidden_states.shape[0] <= self.small_batch_max_tokens:
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
