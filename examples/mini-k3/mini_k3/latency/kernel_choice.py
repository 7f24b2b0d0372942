"""Technique 1: kernels chosen by the step's size, and the fused math both sizes share.

Off switch: ``LatencyOptions.small_batch_kernels`` (env ``MINIK3_LATENCY_DISABLE=small_batch_kernels``);
the size at which it switches: ``LatencyOptions.switch_point`` (default per device in options.py).

What differs between the small-batch and the large-batch path, honestly:

* GPU: linear layers of a small step (<= switch point tokens, <= `GEMV_MAX_ROWS` rows) run a
  Triton GEMV-style kernel (`triton_gemv`: one program per block of output features streams its
  weight rows once and keeps every input row in registers); larger steps use cuBLAS GEMM
  (``F.linear``). The MoE uses the dense-over-experts form at every size on GPU (one GEMV/GEMM
  for the gate and up projections of the shared and all routed experts, one for the down
  projection; no host synchronisation, so the step can be captured in a CUDA graph).
* CPU: there is no hand-written kernel; ``F.linear`` goes to the same oneDNN/MKL routine at
  every size. What changes with the size is the MoE algorithm: a small step groups its few
  tokens by expert on the host (`moe_grouped_on_host`: no ``nonzero``/mask per expert, only the
  chosen experts run, each with one fused gate/up product); a large step uses routed grouped
  computation on tensors (`moe_routed`, each expert runs only on its tokens), as stock does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from .options import LatencyOptions

if TYPE_CHECKING:
    from .shards import LatencyShard

try:  # Triton ships with CUDA builds of torch; CPU-only installs have none
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the install
    triton = None
    tl = None

GEMV_MAX_ROWS = 16


def is_small_step(options: LatencyOptions, tokens: int, switch_point: int) -> bool:
    """Whether a step of ``tokens`` (rows x tokens per row) takes the small-batch kernels."""
    return options.small_batch_kernels and tokens <= switch_point


def moe_form(options: LatencyOptions, x: torch.Tensor, small: bool) -> str:
    """The MoE algorithm of a step: forced by the options, else dense on GPU (no host sync, so
    capturable in a CUDA graph), on CPU grouped on the host when small, routed when large."""
    return options.moe_form or ("dense" if x.is_cuda else "host" if small else "routed")


def rms_norm_fused(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm as one operator (``F.rms_norm``: a fused kernel on CUDA; on CPU the same math as
    `rms_norm` behind one dispatch). Latency path only; stock keeps the model's own norm."""
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def triton_available() -> bool:
    return triton is not None and torch.cuda.is_available()


if triton is not None:

    @triton.jit
    def _gemv_kernel(x_ptr, w_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        pid = tl.program_id(0)
        offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_m = tl.arange(0, BLOCK_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            w = tl.load(w_ptr + offs_n[:, None] * stride_wn + offs_k[None, :],
                        mask=(offs_n[:, None] < N) & (offs_k[None, :] < K), other=0.0).to(tl.float32)
            x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :],
                        mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0).to(tl.float32)
            acc += tl.sum(x[:, None, :] * w[None, :, :], axis=2)
        tl.store(y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :], acc.to(y_ptr.dtype.element_ty),
                 mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def triton_gemv(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T`` for a few rows (``x`` ``[M, K]``, M <= GEMV_MAX_ROWS), fp32 accumulation."""
    M, K = x.shape
    N = weight.shape[0]
    x = x.contiguous()
    weight = weight.contiguous()
    y = torch.empty(M, N, device=x.device, dtype=x.dtype)
    block_m = max(2, triton.next_power_of_2(M))  # masked rows beyond M cost nothing but registers
    block_n = 32
    block_k = max(16, 4096 // (block_n * block_m))
    _gemv_kernel[(triton.cdiv(N, block_n),)](x, weight, y, M, N, K, x.stride(0), weight.stride(0), y.stride(0),
                                             BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=4)
    return y


def linear(x: torch.Tensor, weight: torch.Tensor, small: bool) -> torch.Tensor:
    """``x @ weight.T`` over the last dimension, with the kernel chosen by the step's size."""
    if small and x.is_cuda and triton is not None:
        x2d = x.reshape(-1, x.shape[-1])
        if x2d.shape[0] <= GEMV_MAX_ROWS:
            return triton_gemv(x2d, weight).view(*x.shape[:-1], weight.shape[0])
    return F.linear(x, weight)


def swiglu_fused(x: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor, small: bool) -> torch.Tensor:
    """``down(silu(w1 x) * w3 x)`` with w1 and w3 stacked into one ``gate_up`` weight."""
    gu = linear(x, gate_up, small)
    gate, up = gu.chunk(2, dim=-1)
    return linear(F.silu(gate) * up, down, small)


def moe_dense(x: torch.Tensor, gate_up_all: torch.Tensor, down_all: torch.Tensor, expert_ids: torch.Tensor,
              weights: torch.Tensor, n_experts: int, hidden: int, small: bool) -> torch.Tensor:
    """Shared + routed experts as two matrix products over ALL experts, weighted per token.

    ``gate_up_all`` ``[(1+E) * 2 * hidden, d]``: per expert (shared first) its w1 rows then its
    w3 rows; ``down_all`` ``[d, (1+E) * hidden]``: the w2s side by side. Unrouted experts get
    weight 0, so they add exact zeros.
    """
    n = x.shape[0]
    gu = linear(x, gate_up_all, small).view(n, 1 + n_experts, 2, hidden)
    act = F.silu(gu[:, :, 0]) * gu[:, :, 1]
    combine = torch.zeros(n, 1 + n_experts, device=x.device, dtype=torch.float32)
    combine[:, 0] = 1.0
    combine[:, 1:].scatter_(1, expert_ids, weights)
    act = act * combine.to(act.dtype)[:, :, None]
    return linear(act.reshape(n, (1 + n_experts) * hidden), down_all, small)


def moe_grouped_on_host(x: torch.Tensor, shared: tuple, experts: list[tuple], expert_ids: torch.Tensor,
                        weights: torch.Tensor) -> torch.Tensor:
    """CPU small-batch MoE: group the few tokens by expert on the host (reading the routing back
    costs nothing on a CPU), then run only the chosen experts, with their fused [w1; w3] weight."""
    out = swiglu_fused(x, *shared, small=True)
    chosen: dict[int, list[tuple[int, int]]] = {}
    for token, row in enumerate(expert_ids.tolist()):
        for slot, expert in enumerate(row):
            chosen.setdefault(expert, []).append((token, slot))
    for expert, pairs in sorted(chosen.items()):
        tokens = [t for t, _ in pairs]
        if len(tokens) == 1:
            t, slot = pairs[0]
            y = swiglu_fused(x[t:t + 1], *experts[expert], small=True) * weights[t, slot].to(x.dtype)
            out[t:t + 1] += y
        else:
            index = torch.tensor(tokens, device=x.device)
            scale = weights[index, torch.tensor([s for _, s in pairs], device=x.device), None].to(x.dtype)
            out.index_add_(0, index, swiglu_fused(x[index], *experts[expert], small=True) * scale)
    return out


def moe_routed(x: torch.Tensor, shared: tuple, experts: list[tuple], expert_ids: torch.Tensor,
               weights: torch.Tensor) -> torch.Tensor:
    """Stock-style MoE: the shared expert on all tokens, each routed expert on its tokens only.

    ``shared`` and each of ``experts`` are ``(gate_up, down)`` weight pairs.
    """
    out = swiglu_fused(x, *shared, small=False)
    routed = torch.zeros_like(x)
    for e, (gate_up, down) in enumerate(experts):
        token_idx, slot = (expert_ids == e).nonzero(as_tuple=True)
        if token_idx.numel() == 0:
            continue
        y = swiglu_fused(x[token_idx], gate_up, down, small=False) * weights[token_idx, slot, None].to(x.dtype)
        routed.index_add_(0, token_idx, y)
    return out + routed


def moe(form: str, x: torch.Tensor, s: LatencyShard, expert_ids: torch.Tensor, weights: torch.Tensor,
        n_experts: int, small: bool) -> torch.Tensor:
    """The MoE feed-forward of one layer shard in the chosen form (`moe_form`)."""
    if form == "dense":
        return moe_dense(x, s.gate_up_all, s.down_all, expert_ids, weights, n_experts, s.expert_hidden, small)
    if form == "host":
        return moe_grouped_on_host(x, s.shared_pair, s.expert_pairs, expert_ids, weights)
    return moe_routed(x, s.shared_pair, s.expert_pairs, expert_ids, weights)
