"""The mini-K3 decoder: multi-head latent attention + mixture-of-experts, as in DeepSeek-V3/Kimi K2.

Shapes, per layer:
  attention  x ─q_a_proj→ q_a_norm ─q_b_proj→ per-head [q_nope | q_rope]
             x ─kv_a_proj→ [c_kv (kv_lora_rank) | k_rope (shared by all heads)]; c_kv ─kv_a_norm→
             c_kv ─kv_b_proj→ per-head [k_nope | v];  heads ─o_proj→ d_model
  feed-forward  dense SwiGLU (first `n_dense_layers`), else shared expert + top-k routed experts

Positions and the cache (how batches of different lengths work)
---------------------------------------------------------------
Every token carries its own position (``positions[b, t]``, 0-based within its sequence). The
cache stores, per layer and row, the compressed latent ``c_kv`` (after its norm) and the rotated
``k_rope`` at *slot = position*. A query at position p sees exactly the cache slots ``0..p`` of
its row. Rows of different lengths therefore need no attention mask from the caller:
right-pad a prefill batch (pad tokens get positions after the row's real tokens; their outputs
are ignored and their slots are overwritten by the next real tokens), then decode each row at
its own next position. Without a cache the same rule holds among the given tokens (key visible
iff its position <= the query's), so a right-padded batch without a cache is also correct.
Speculative verification feeds several tokens at consecutive positions; rejected tokens leave
stale slots beyond the accepted length, which no later query can see until they are rewritten.

Stock attention paths (see `LatentAttention`): a prefill (more than `ABSORBED_MAX_TOKENS` new
tokens) decompresses the latent to per-head keys and values; a decode / verify step (at most
`ABSORBED_MAX_TOKENS` new tokens, with a cache) attends in the latent space with the key and
value up-projections absorbed into the query and output, which is what makes the latent cache
cheap to read. A prefill whose rows all start at position 0 uses SDPA's causal mode over the
new tokens (same rule, no materialised mask).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .config import MiniK3Config

ABSORBED_MAX_TOKENS = 8  # a cached step with at most this many new tokens uses the absorbed form


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * self.weight.float()).to(x.dtype)


def rope_cos_sin(positions: torch.Tensor, dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables ``[B, T, dim/2]`` (float32) for integer ``positions`` ``[B, T]``."""
    inv_freq = theta ** (-torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32) / dim)
    angles = positions.to(torch.float32)[..., None] * inv_freq
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[..., i], x[..., i + dim/2]) of ``x`` ``[B, T, H, dim]`` by the angle tables."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    c, s = cos[:, :, None, :], sin[:, :, None, :]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


@dataclass
class KVCache:
    """Compressed attention cache: per layer, row and slot (= position) the latent and rope key.

    ``c_kv`` is ``[n_layers, B, max_len, kv_lora_rank]``; ``k_rope`` is
    ``[n_layers, B, max_len, qk_rope_head_dim]``.
    """

    c_kv: torch.Tensor
    k_rope: torch.Tensor

    @property
    def batch_size(self) -> int:
        return self.c_kv.shape[1]

    @property
    def max_len(self) -> int:
        return self.c_kv.shape[2]


class LatentAttention(nn.Module):
    """Multi-head latent attention with a decoupled rotary part."""

    def __init__(self, config: MiniK3Config) -> None:
        super().__init__()
        c = config
        self.config = c
        self.n_heads = c.n_heads
        self.q_a_proj = nn.Linear(c.d_model, c.q_lora_rank, bias=False)
        self.q_a_norm = RMSNorm(c.q_lora_rank, c.rms_eps)
        self.q_b_proj = nn.Linear(c.q_lora_rank, c.n_heads * c.qk_head_dim, bias=False)
        self.kv_a_proj = nn.Linear(c.d_model, c.kv_lora_rank + c.qk_rope_head_dim, bias=False)
        self.kv_a_norm = RMSNorm(c.kv_lora_rank, c.rms_eps)
        self.kv_b_proj = nn.Linear(c.kv_lora_rank, c.n_heads * (c.qk_nope_head_dim + c.v_head_dim), bias=False)
        self.o_proj = nn.Linear(c.n_heads * c.v_head_dim, c.d_model, bias=False)
        self.scale = 1.0 / math.sqrt(c.qk_head_dim)

    def project(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """Queries (nope, rotated rope) per head, and the new latent and rotated rope key."""
        c = self.config
        B, T, _ = x.shape
        q = self.q_b_proj(self.q_a_norm(self.q_a_proj(x))).view(B, T, self.n_heads, c.qk_head_dim)
        q_nope, q_rope = q.split([c.qk_nope_head_dim, c.qk_rope_head_dim], dim=-1)
        q_rope = apply_rope(q_rope, cos, sin)
        c_kv, k_rope = self.kv_a_proj(x).split([c.kv_lora_rank, c.qk_rope_head_dim], dim=-1)
        c_kv = self.kv_a_norm(c_kv)
        k_rope = apply_rope(k_rope[:, :, None, :], cos, sin)[:, :, 0, :]
        return q_nope, q_rope, c_kv, k_rope

    def attend_decompressed(self, q_nope, q_rope, c_kv, k_rope, mask, causal: bool) -> torch.Tensor:
        """Stock prefill path: up-project the latent to per-head keys/values, then SDPA.

        ``mask`` is a bool ``[B, T, S]`` (True = may attend) or None with ``causal`` True.
        """
        c = self.config
        B, S, _ = c_kv.shape
        kv = self.kv_b_proj(c_kv).view(B, S, self.n_heads, c.qk_nope_head_dim + c.v_head_dim)
        k_nope, v = kv.split([c.qk_nope_head_dim, c.v_head_dim], dim=-1)
        k = torch.cat([k_nope, k_rope[:, :, None, :].expand(B, S, self.n_heads, c.qk_rope_head_dim)], dim=-1)
        q = torch.cat([q_nope, q_rope], dim=-1)
        if c.v_head_dim < c.qk_head_dim:
            # fused SDPA kernels (flash) want equal q/k/v head sizes: pad v with zeros, slice after
            v = F.pad(v, (0, c.qk_head_dim - c.v_head_dim))
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
            attn_mask=None if mask is None else mask[:, None, :, :],
            is_causal=causal and mask is None, scale=self.scale,
        )
        out = out[..., : c.v_head_dim]
        return out.transpose(1, 2).reshape(B, q.shape[1], self.n_heads * c.v_head_dim)

    def attend_absorbed(self, q_nope, q_rope, c_kv, k_rope, mask) -> torch.Tensor:
        """Stock decode path: attention in the latent space (k/v up-projections absorbed)."""
        c = self.config
        B, T = q_nope.shape[:2]
        w = self.kv_b_proj.weight.view(self.n_heads, c.qk_nope_head_dim + c.v_head_dim, c.kv_lora_rank)
        w_uk, w_uv = w[:, : c.qk_nope_head_dim], w[:, c.qk_nope_head_dim:]
        q_latent = torch.einsum("bthn,hnc->bthc", q_nope, w_uk)
        scores = torch.einsum("bthc,bsc->bhts", q_latent, c_kv) + torch.einsum("bthr,bsr->bhts", q_rope, k_rope)
        scores = scores.float() * self.scale
        scores = scores.masked_fill(~mask[:, None, :, :], float("-inf"))
        probs = torch.softmax(scores, dim=-1).to(c_kv.dtype)
        out_latent = torch.einsum("bhts,bsc->bthc", probs, c_kv)
        out = torch.einsum("bthc,hvc->bthv", out_latent, w_uv)
        return out.reshape(B, T, self.n_heads * c.v_head_dim)

    def forward(self, x, positions, cos, sin, layer_cache=None, cache_rows=None, causal=False):
        """``layer_cache`` is ``(c_kv, k_rope)`` views of one layer of a `KVCache` or None."""
        q_nope, q_rope, c_kv, k_rope = self.project(x, cos, sin)
        if layer_cache is None:
            mask = None if causal else positions[:, None, :] <= positions[:, :, None]
            out = self.attend_decompressed(q_nope, q_rope, c_kv, k_rope, mask, causal)
            return self.o_proj(out)
        cache_c, cache_r = layer_cache
        all_rows = cache_rows is None
        if all_rows:
            cache_rows = torch.arange(positions.shape[0], device=positions.device)
        rows = cache_rows[:, None].expand_as(positions)
        cache_c[rows, positions] = c_kv.to(cache_c.dtype)
        cache_r[rows, positions] = k_rope.to(cache_r.dtype)
        if causal:
            # a prefill from position 0 in every row: the new tokens are all there is to see
            out = self.attend_decompressed(q_nope, q_rope, c_kv, k_rope, None, causal=True)
            return self.o_proj(out)
        span = int(positions.max()) + 1
        if all_rows:  # a view, no gather
            keys_c, keys_r = cache_c[:, :span].to(x.dtype), cache_r[:, :span].to(x.dtype)
        else:
            keys_c, keys_r = cache_c[cache_rows, :span].to(x.dtype), cache_r[cache_rows, :span].to(x.dtype)
        slots = torch.arange(span, device=positions.device)
        mask = slots[None, None, :] <= positions[:, :, None]
        if x.shape[1] <= ABSORBED_MAX_TOKENS:
            out = self.attend_absorbed(q_nope, q_rope, keys_c, keys_r, mask)
        else:
            out = self.attend_decompressed(q_nope, q_rope, keys_c, keys_r, mask, causal=False)
        return self.o_proj(out)


class SwiGLU(nn.Module):
    """``w2(silu(w1 x) * w3 x)``: gate w1, up w3, down w2."""

    def __init__(self, d_model: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d_model, bias=False)
        self.w3 = nn.Linear(d_model, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


@dataclass(frozen=True)
class Routing:
    """Which experts each token goes to, with normalised weights; ``[N, top_k]`` each."""

    expert_ids: torch.Tensor
    weights: torch.Tensor
    probs: torch.Tensor  # full softmax over experts ``[N, E]`` (for the balance loss)


class MoE(nn.Module):
    """Shared expert(s) always applied plus top-k routed SwiGLU experts."""

    def __init__(self, config: MiniK3Config) -> None:
        super().__init__()
        self.top_k = config.top_k
        self.n_experts = config.n_routed_experts
        self.router = nn.Linear(config.d_model, config.n_routed_experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(config.d_model, config.expert_hidden) for _ in range(config.n_routed_experts))
        self.shared = SwiGLU(config.d_model, config.expert_hidden * config.n_shared_experts)
        self.balance_loss: torch.Tensor | None = None

    def route(self, x_flat: torch.Tensor) -> Routing:
        probs = torch.softmax(self.router(x_flat).float(), dim=-1)
        top_w, top_i = probs.topk(self.top_k, dim=-1)
        return Routing(expert_ids=top_i, weights=top_w / top_w.sum(-1, keepdim=True), probs=probs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x_flat = x.reshape(-1, shape[-1])
        routing = self.route(x_flat)
        out = self.shared(x_flat)
        routed = torch.zeros_like(x_flat)
        for e, expert in enumerate(self.experts):
            token_idx, slot = (routing.expert_ids == e).nonzero(as_tuple=True)
            if token_idx.numel() == 0:
                continue
            y = expert(x_flat[token_idx]) * routing.weights[token_idx, slot, None].to(x.dtype)
            routed.index_add_(0, token_idx, y)
        if self.training:
            # Switch-style load balance: fraction of tokens per expert times mean router prob.
            counts = torch.bincount(routing.expert_ids.flatten(), minlength=self.n_experts).float()
            frac = counts / routing.expert_ids.numel()
            self.balance_loss = self.n_experts * (frac * routing.probs.mean(0)).sum()
        return (out + routed).reshape(shape)


class Block(nn.Module):
    def __init__(self, config: MiniK3Config, layer_index: int) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(config.d_model, config.rms_eps)
        self.attn = LatentAttention(config)
        self.ffn_norm = RMSNorm(config.d_model, config.rms_eps)
        self.mlp: nn.Module
        if layer_index < config.n_dense_layers:
            self.mlp = SwiGLU(config.d_model, config.dense_hidden)
        else:
            self.mlp = MoE(config)

    def forward(self, x, positions, cos, sin, layer_cache=None, cache_rows=None, causal=False):
        x = x + self.attn(self.attn_norm(x), positions, cos, sin, layer_cache, cache_rows, causal)
        return x + self.mlp(self.ffn_norm(x))


class MiniK3(nn.Module):
    """Decoder-only LM. See the module docstring for positions, padding and the cache."""

    def __init__(self, config: MiniK3Config) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.layers = nn.ModuleList(Block(config, i) for i in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.rms_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    def new_cache(self, batch_size: int, max_len: int, device=None, dtype=None) -> KVCache:
        """An empty latent cache for ``batch_size`` rows of up to ``max_len`` positions."""
        c = self.config
        if max_len > c.max_position:
            raise ValueError(f"max_len {max_len} exceeds max_position {c.max_position}")
        param = next(self.parameters())
        device = param.device if device is None else device
        dtype = param.dtype if dtype is None else dtype
        return KVCache(
            c_kv=torch.zeros(c.n_layers, batch_size, max_len, c.kv_lora_rank, device=device, dtype=dtype),
            k_rope=torch.zeros(c.n_layers, batch_size, max_len, c.qk_rope_head_dim, device=device, dtype=dtype),
        )

    def hidden_states(self, input_ids, positions=None, cache=None, cache_rows=None) -> torch.Tensor:
        B, T = input_ids.shape
        causal = positions is None and cache is None
        if positions is None:
            if cache is not None:
                raise ValueError("positions are required with a cache")
            positions = torch.arange(T, device=input_ids.device).expand(B, T)
        if int(positions.max()) >= self.config.max_position:
            raise ValueError(f"position {int(positions.max())} exceeds max_position {self.config.max_position}")
        if cache is not None and cache_rows is None and B != cache.batch_size:
            raise ValueError("batch size differs from the cache's: pass cache_rows")
        if not causal:
            # Positions 0..T-1 in every row (a prefill from empty): a plain causal mask says the
            # same as the position rule, and lets SDPA skip materialising a [B, T, S] mask.
            from_zero = bool((positions == torch.arange(T, device=positions.device)).all())
            causal = from_zero and (cache is None or T > ABSORBED_MAX_TOKENS)
        cos, sin = rope_cos_sin(positions, self.config.qk_rope_head_dim, self.config.rope_theta)
        x = self.embed(input_ids)
        for i, layer in enumerate(self.layers):
            layer_cache = None if cache is None else (cache.c_kv[i], cache.k_rope[i])
            x = layer(x, positions, cos, sin, layer_cache, cache_rows, causal)
        return self.norm(x)

    def forward(self, input_ids, positions=None, cache=None, cache_rows=None,
                latency_specialized: bool = False, latency_options=None) -> torch.Tensor:
        """Logits ``[B, T, vocab]`` for ``input_ids`` ``[B, T]``.

        positions: ``[B, T]`` LongTensor (None: 0..T-1 with a causal mask; training uses this).
        cache: a `KVCache`; the new tokens' latents are written at slot = position.
        cache_rows: ``[B]`` LongTensor, which cache row each input row uses (default 0..B-1).
        latency_specialized: opt-in decode path (mini_k3/latency); off, nothing below changes.
        latency_options: its `LatencyOptions` (None: every technique, less MINIK3_LATENCY_DISABLE).
        """
        if latency_specialized:
            from .latency import latency_forward

            return latency_forward(self, input_ids, positions, cache, cache_rows, latency_options)
        return self.lm_head(self.hidden_states(input_ids, positions, cache, cache_rows))

    def balance_loss(self) -> torch.Tensor | None:
        losses = [m.balance_loss for m in self.modules() if isinstance(m, MoE) and m.balance_loss is not None]
        return torch.stack(losses).mean() if losses else None

    @torch.no_grad()
    def prefill(self, prompts: list[list[int]], cache: KVCache, cache_rows=None) -> torch.Tensor:
        """Run right-padded prompts into ``cache``; returns each row's last-token logits ``[B, V]``."""
        device = cache.c_kv.device
        lengths = torch.tensor([len(p) for p in prompts], device=device)
        if int(lengths.min()) < 1:
            raise ValueError("empty prompt")
        T = int(lengths.max())
        ids = torch.zeros(len(prompts), T, dtype=torch.long, device=device)
        for b, p in enumerate(prompts):
            ids[b, : len(p)] = torch.tensor(p, dtype=torch.long)
        positions = torch.arange(T, device=device).expand(len(prompts), T)
        logits = self(ids, positions, cache, cache_rows)
        return logits[torch.arange(len(prompts), device=device), lengths - 1]

    @torch.no_grad()
    def decode_step(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache, cache_rows=None) -> torch.Tensor:
        """Stock decode: one new token per row (``[B]``) at its own position; logits ``[B, V]``."""
        return self(tokens[:, None], positions[:, None], cache, cache_rows)[:, 0]


WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"


def load_pretrained(path: str | Path | None = None, device="cpu", dtype: torch.dtype = torch.float32):
    """Load the shipped (or given) weights: returns ``(model, config, tokenizer)`` in eval mode."""
    from safetensors.torch import load_file

    from .tokenizer import ByteTokenizer

    folder = WEIGHTS_DIR if path is None else Path(path)
    config = MiniK3Config.load(folder / "config.json")
    model = MiniK3(config)
    state = load_file(str(folder / "model.safetensors"))
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=True)
    model.to(device=device, dtype=dtype).eval()
    return model, config, ByteTokenizer()
