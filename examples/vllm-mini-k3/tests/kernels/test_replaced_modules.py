"""Each module the latency plugin replaces, against vLLM's stock module, at every declared point.

Both models carry the checkpoint's trained weights (`model_pairs`); inputs are random hidden
states of unit scale. Tolerances (atol scaled by the reference's largest magnitude m):

| compared | fp32 (atol, rtol) | bf16 (atol, rtol) |
|---|---|---|
| RMSNorm, fused kernel vs native | 1e-5 m, 1.3e-6 | 2**-7 m, 1.6e-2 |
| router weights (ids must be equal) | 1e-6, 1.3e-6 | 1e-6, 1.3e-6 (both route in fp32) |
| MoE layer (shared + routed) | 1e-5 m, 1.3e-6 | 2**-5 m, 1.6e-2 |

Why: fp32 paths differ only in summation order (the fused norm reduces in another order, the
dense small-batch MoE adds exact zeros for unrouted experts and sums experts inside one GEMM):
a few float32 ulps of the largest value, torch's fp32 defaults scaled to it. bf16: the native
norm rounds the normalised value to bf16 before the weight multiply, the fused kernel after:
one bf16 rounding (2**-8 relative) of the largest value, two allowed. The MoE in bf16 rounds
its GEMM outputs, activations and routing weights, in another order on each side: eight bf16
ulps of the largest value. A wrong kernel (a dropped expert, unnormalised weights, a wrong
slice) moves outputs by O(0.1 - 1) of that scale, far outside.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from conftest import BATCHES, grid

POINTS = grid(batch=BATCHES, dtype=["fp32", "bf16"])
TORCH_DTYPE = {"fp32": torch.float32, "bf16": torch.bfloat16}

try:  # records tolerance and worst error for the evidence when the fasttrack plugin runs
    from fasttrack.kernel_testing import assert_close_recorded
except ImportError:  # the example also runs without fasttrack installed
    assert_close_recorded = None


def assert_close(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float, msg: str) -> None:
    actual, expected = actual.float(), expected.float()
    if assert_close_recorded is not None:
        assert_close_recorded(actual, expected, atol=atol, rtol=rtol, msg=msg)
    else:
        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, msg=msg)


def scale(reference: torch.Tensor) -> float:
    return max(1.0, float(reference.float().abs().max()))


def norms(model: Any) -> dict[str, Any]:
    out = {"model.norm": model.model.norm}
    for layer in model.model.layers:
        p = f"layer{layer.layer_idx}."
        out[p + "input_layernorm"] = layer.input_layernorm
        out[p + "post_attention_layernorm"] = layer.post_attention_layernorm
        out[p + "q_a_layernorm"] = layer.self_attn.q_a_layernorm
        out[p + "kv_a_layernorm"] = layer.self_attn.kv_a_layernorm
    return out


@pytest.mark.fasttrack_scope("batch", "dtype", default=POINTS)
def test_fused_norms(scope_point: dict[str, Any], model_pairs: Any) -> None:
    from vllm_mini_k3.kernels import FusedRMSNorm

    batch, dtype = scope_point["batch"], scope_point["dtype"]
    pair = model_pairs(dtype)
    stock, cand = norms(pair.stock), norms(pair.candidate)
    gen = torch.Generator().manual_seed(batch)
    rtol = 1.3e-6 if dtype == "fp32" else 1.6e-2
    with pair.active():
        for name, norm in cand.items():
            assert type(norm) is FusedRMSNorm, f"{name} was not replaced"
            size = norm.weight.shape[0]
            # the attention's kv_a input is a slice of a wider projection output: strided
            wide = torch.randn(batch, size + 32, generator=gen).to(TORCH_DTYPE[dtype])
            x = wide[:, :size] if "kv_a" in name else wide[:, :size].contiguous()
            ref = stock[name](x)
            atol = (1e-5 if dtype == "fp32" else 2.0 ** -7) * scale(ref)
            assert_close(norm(x), ref, atol, rtol, f"{name}, batch {batch}, {dtype}")
            if "layernorm" in name and "_a_" not in name:  # the decoder's fused residual add
                res = torch.randn(batch, size, generator=gen).to(TORCH_DTYPE[dtype])
                ref_out, ref_res = stock[name](x.clone(), res.clone())
                out, new_res = norm(x.clone(), res.clone())
                atol = (1e-5 if dtype == "fp32" else 2.0 ** -7) * scale(ref_out)
                assert_close(out, ref_out, atol, rtol, f"{name} with residual, batch {batch}, {dtype}")
                assert_close(new_res, ref_res, atol, rtol, f"{name} residual sum, batch {batch}, {dtype}")


@pytest.mark.fasttrack_scope("batch", "dtype", default=POINTS)
def test_fused_router(scope_point: dict[str, Any], model_pairs: Any) -> None:
    from vllm_mini_k3.kernels import FusedSoftmaxTopkRouter

    batch, dtype = scope_point["batch"], scope_point["dtype"]
    pair = model_pairs(dtype)
    gen = torch.Generator().manual_seed(1000 + batch)
    with pair.active():
        for s_layer, c_layer in zip(pair.stock.model.layers[1:], pair.candidate.model.layers[1:]):
            router = c_layer.mlp.experts.router
            assert type(router) is FusedSoftmaxTopkRouter, f"layer {c_layer.layer_idx}: router not replaced"
            x = torch.randn(batch, 256, generator=gen).to(TORCH_DTYPE[dtype])
            logits = (torch.randn(batch, router.global_num_experts, generator=gen) * 2).to(TORCH_DTYPE[dtype])
            ref_w, ref_ids = s_layer.mlp.experts.router.select_experts(hidden_states=x, router_logits=logits)
            w, ids = router.select_experts(hidden_states=x, router_logits=logits)
            # the same experts per token (order within the top k is free), and the same weights
            ref_order, order = ref_ids.argsort(-1), ids.argsort(-1)
            assert torch.equal(ref_ids.gather(1, ref_order), ids.gather(1, order)), f"layer {c_layer.layer_idx}: expert ids"
            assert_close(w.gather(1, order), ref_w.gather(1, ref_order), 1e-6, 1.3e-6,
                         f"layer {c_layer.layer_idx} routing weights, batch {batch}, {dtype}")


@pytest.mark.fasttrack_scope("batch", "dtype", default=POINTS)
def test_small_batch_moe(scope_point: dict[str, Any], model_pairs: Any) -> None:
    from vllm_mini_k3.kernels import LatencyMoE

    batch, dtype = scope_point["batch"], scope_point["dtype"]
    pair = model_pairs(dtype)
    gen = torch.Generator().manual_seed(2000 + batch)
    rtol = 1.3e-6 if dtype == "fp32" else 1.6e-2
    with pair.active():
        for s_layer, c_layer in zip(pair.stock.model.layers[1:], pair.candidate.model.layers[1:]):
            moe = c_layer.mlp
            assert type(moe) is LatencyMoE, f"layer {c_layer.layer_idx}: MoE not replaced"
            x = torch.randn(batch, 256, generator=gen).to(TORCH_DTYPE[dtype])
            ref = s_layer.mlp(x.clone())
            atol = (1e-5 if dtype == "fp32" else 2.0 ** -5) * scale(ref)
            path = "small-batch kernel" if 2 <= batch <= moe.small_batch_max_tokens else "stock kernel"
            assert_close(moe(x.clone()), ref, atol, rtol, f"layer {c_layer.layer_idx} MoE ({path}), batch {batch}, {dtype}")
