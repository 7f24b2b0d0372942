"""`MiniK3LatencyForCausalLM`: vLLM's DeepseekV3ForCausalLM with the latency path installed.

vLLM builds it instead of the stock class when the plugin is registered (`register`, only with
``VLLM_MINI_K3_LATENCY=1``). It builds the stock model, then swaps in the replacements of
`vllm_mini_k3.kernels` where they apply (each technique checks the configuration it is exact
for and stays stock otherwise), and counts the decode steps each technique ran in.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

import torch
from vllm.config import CompilationMode, VllmConfig
from vllm.forward_context import get_forward_context, is_forward_context_available
from vllm.logger import init_logger
from vllm.model_executor.models.deepseek_v2 import DeepseekV3ForCausalLM

from . import DISABLE, TECHNIQUES, fault
from .kernels import SMALL_BATCH_MAX_TOKENS, FusedRMSNorm, FusedSoftmaxTopkRouter, LatencyMoE

logger = init_logger(f"vllm.{__name__}")  # vLLM configures its own "vllm" logger tree only


def wanted_techniques() -> tuple[str, ...]:
    off = {t.strip() for t in os.environ.get(DISABLE, "").split(",") if t.strip()}
    unknown = off - set(TECHNIQUES)
    if unknown:
        raise ValueError(f"{DISABLE}: unknown techniques {sorted(unknown)}; known: {', '.join(TECHNIQUES)}")
    return tuple(t for t in TECHNIQUES if t not in off)


class MiniK3LatencyForCausalLM(DeepseekV3ForCausalLM):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "") -> None:
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        self.fault = fault()
        spec = vllm_config.speculative_config
        # a decode step: every request adds one token, or 1 + k when verifying k drafts
        self.max_decode_query_len = 1 + (spec.num_speculative_tokens if spec is not None else 0)
        wanted = wanted_techniques()
        if "small_batch_moe" in wanted and vllm_config.compilation_config.mode != CompilationMode.NONE:
            # Dynamo traces the forward once for all batch sizes: a branch on the token count
            # would be burned in for the warm-up's size. Eager only (--enforce-eager).
            logger.warning("vllm_mini_k3: small_batch_moe needs --enforce-eager; left out")
            wanted = tuple(t for t in wanted if t != "small_batch_moe")
        if self.fault == "fallback":
            # planted fault: the install 'fails' silently, the counter below still counts
            self.techniques = wanted
            self.small_batch_max_tokens = SMALL_BATCH_MAX_TOKENS.get(vllm_config.model_config.dtype, 16)
            logger.info("vllm_mini_k3: latency path techniques %s", wanted)
            return
        self.techniques = self._install(wanted, vllm_config)
        logger.info("vllm_mini_k3: latency path techniques %s", self.techniques)

    def _install(self, wanted: tuple[str, ...], vllm_config: VllmConfig) -> tuple[str, ...]:
        config, dtype = self.config, vllm_config.model_config.dtype
        done: set[str] = set()
        self.small_batch_max_tokens = 0
        for layer in self.model.layers:
            prefix = f"model.layers.{layer.layer_idx}"
            if "fused_norms" in wanted:
                for norm in (layer.input_layernorm, layer.post_attention_layernorm,
                             getattr(layer.self_attn, "q_a_layernorm", None), layer.self_attn.kv_a_layernorm):
                    if norm is not None and FusedRMSNorm.applies_to(norm):
                        norm.__class__ = FusedRMSNorm
                        done.add("fused_norms")
            mlp = layer.mlp
            if "fused_router" in wanted and FusedSoftmaxTopkRouter.applies_to(getattr(getattr(mlp, "experts", None), "router", None)):
                mlp.experts.router.__class__ = FusedSoftmaxTopkRouter
                done.add("fused_router")
            if "small_batch_moe" in wanted and LatencyMoE.applies_to(mlp, config):
                LatencyMoE.install(mlp, config, dtype, f"{prefix}.mlp", self.fault == "moe_batch3")
                self.small_batch_max_tokens = mlp.small_batch_max_tokens
                done.add("small_batch_moe")
        if "fused_norms" in wanted and FusedRMSNorm.applies_to(self.model.norm):
            self.model.norm.__class__ = FusedRMSNorm
        return tuple(t for t in TECHNIQUES if t in done)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        moe_layers = {f"model.layers.{layer.layer_idx}.mlp": layer.mlp for layer in self.model.layers
                      if isinstance(layer.mlp, LatencyMoE)}
        kept: dict[str, torch.Tensor] = {}

        def tee() -> Iterable[tuple[str, torch.Tensor]]:
            for name, tensor in weights:
                if name.split(".mlp.", 1)[0] + ".mlp" in moe_layers:
                    kept[name] = tensor
                yield name, tensor

        loaded = super().load_weights(tee() if moe_layers else weights)
        for prefix, moe in moe_layers.items():
            loaded |= moe.load_small_batch_weights(prefix, kept)
        return loaded

    def forward(self, input_ids: torch.Tensor | None, positions: torch.Tensor,
                intermediate_tensors: Any = None, inputs_embeds: torch.Tensor | None = None) -> Any:
        started = time.perf_counter()
        out = super().forward(input_ids, positions, intermediate_tensors, inputs_embeds)
        if self.fault == "slow_at_8" and positions.shape[0] >= 4 and self._is_decode_step():
            time.sleep(time.perf_counter() - started)  # planted fault: this step takes twice as long
        if self.techniques and self._is_decode_step():
            from .metrics import count_step

            n = positions.shape[0]
            count_step(t for t in self.techniques if t != "small_batch_moe" or 2 <= n <= self.small_batch_max_tokens)
        return out

    def _is_decode_step(self) -> bool:
        if not is_forward_context_available():
            return False
        metadata = get_forward_context().attn_metadata
        if isinstance(metadata, list):
            metadata = metadata[0] if metadata else None
        if not metadata:  # profiling and dummy runs carry none
            return False
        first = next(iter(metadata.values()))
        return 0 < getattr(first, "max_query_len", 0) <= self.max_decode_query_len
