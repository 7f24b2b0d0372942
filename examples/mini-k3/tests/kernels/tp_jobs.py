"""Jobs that run on every tensor-parallel rank (imported by name in the spawned processes).

Each job builds (once per rank, cached in ``ctx.state``) the same tiny random-init mini-K3 from
a seed, prefills a latent cache with the model's own forward, and runs decode steps through the
stock and latency paths. Results come back as CPU float32 tensors for the test to compare.
"""

from __future__ import annotations

import hashlib
import os
import random

import torch

from mini_k3.config import MiniK3Config
from mini_k3.latency import LatencyDecoder, LatencyOptions
from mini_k3.latency.fused_allreduce import DELAY_ENV, fused_linear_all_reduce, rank_order_sum
from mini_k3.model import KVCache, MiniK3
from mini_k3.parallel import RankContext
from mini_k3.tensor_parallel import StockDecoder, stock_linear_all_reduce

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
TECHNIQUES = ("all", "small_batch_kernels", "fused_allreduce", "split_projections", "prefetch", "dense_moe", "none")


def tiny_config(max_position: int = 256) -> MiniK3Config:
    # four heads and widths divisible by 4, so TP 1, 2 and 4 all shard evenly
    return MiniK3Config.tiny(n_heads=4, max_position=max_position)


def build_model(ctx: RankContext, dtype: str, seed: int = 0, max_position: int = 256,
                scale: float = 4.0) -> MiniK3:
    key = ("model", dtype, seed, max_position, scale)
    if key not in ctx.state:
        torch.manual_seed(seed)
        model = MiniK3(tiny_config(max_position))
        with torch.no_grad():  # larger than the init: attention and routing far from uniform
            for p in model.parameters():
                if p.dim() > 1:
                    p.mul_(scale)
        ctx.state[key] = model.to(device=ctx.device, dtype=DTYPES[dtype]).eval()
    return ctx.state[key]


def options_for(technique: str) -> LatencyOptions:
    """All techniques, exactly one of them, or none (the latency path's plumbing alone)."""
    off = LatencyOptions(small_batch_kernels=False, fused_allreduce=False, split_projections=False,
                         prefetch=False, cuda_graphs=False)
    if technique == "all":
        return LatencyOptions(cuda_graphs=False, prefetch_without_comm=True)
    if technique == "none":
        return off
    if technique == "dense_moe":  # the GPU's MoE form, checked on CPU too
        return LatencyOptions(cuda_graphs=False, moe_form="dense")
    extra = {"prefetch_without_comm": True} if technique == "prefetch" else {}
    return LatencyOptions(**{**vars(off), technique: True, **extra})


def _prefilled_cache(model: MiniK3, batch: int, max_len: int, seed: int) -> tuple[KVCache, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 13, (batch,), generator=g)
    prompts = [torch.randint(0, model.config.vocab_size, (int(n),), generator=g).tolist() for n in lengths]
    cache = model.new_cache(batch, max_len)
    model.prefill(prompts, cache)
    return cache, lengths


def _clone(cache: KVCache) -> KVCache:
    return KVCache(cache.c_kv.clone(), cache.k_rope.clone())


def decode_step_variants(ctx: RankContext, batch: int, tokens: int, dtype: str, technique: str,
                         seed: int = 0, plant_ordering_bug: bool = False) -> dict[str, torch.Tensor]:
    """One decode / verify step of ``tokens`` tokens per row through: the unsharded model, stock TP
    and the latency path with ``technique``; logits (float32, CPU) and the updated caches."""
    model = build_model(ctx, dtype)
    cache, lengths = _prefilled_cache(model, batch, 32, seed)
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, model.config.vocab_size, (batch, tokens), generator=g).to(ctx.device)
    positions = (lengths[:, None] + torch.arange(tokens)[None]).to(ctx.device)
    out: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        ref_cache = _clone(cache)
        out["model"] = model(ids, positions, ref_cache).float().cpu()
        stock = StockDecoder(model, ctx)
        stock_cache = _clone(cache)
        out["stock"] = stock.forward(ids, positions, stock_cache).float().cpu()
        options = options_for(technique)
        if plant_ordering_bug:
            options = LatencyOptions(**{**vars(options), "plant_ordering_bug": True})
        cand = LatencyDecoder(model, ctx, options)
        cand_cache = _clone(cache)
        out["candidate"] = cand.forward(ids, positions, cand_cache).float().cpu()
    out["stock_cache"] = stock_cache.c_kv.float().cpu()
    out["candidate_cache"] = cand_cache.c_kv.float().cpu()
    return out


# Positions past an edge the context-edge steps reach (a verify step of 1 + 7 drafted tokens
# straddles it), and the slots of real content a correct mask must leave unread past every row.
EDGE_REACH = 8
# Weight scale of the context-edge model. At x4 a query spreads its attention over a thousand keys
# (its own weighs ~1/1000), so losing its latest keys moves bf16 logits by less than bf16's own
# noise; a trained model's heads keep real weight on recent keys that far out, and at x16 so does
# this one (measured: a mask built in bf16 moves logits by 0.28-0.95, clean bf16 by 0.031, the
# tolerance is ~0.2; fp32 clean 1.4e-6).
EDGE_SCALE = 16.0


def context_edge_variants(ctx: RankContext, edge: int, tokens: int, dtype: str, seed: int = 0
                          ) -> dict[str, torch.Tensor]:
    """One step through the unsharded model, stock and the latency path (every technique) at the
    positions around a context bucket edge: decode (``tokens`` 1) with rows whose queries stand at
    edge - 2, edge - 1 and edge, or a verify step of ``tokens`` tokens per row from edge - tokens // 2
    across it. Every row reads one cache prefilled by the model's own forward to edge + EDGE_REACH
    tokens, so each row's slots past its own position hold real keys that a correct mask never reads
    (a mask off by one, or rounded, reads them or drops the row's latest keys)."""
    model = build_model(ctx, dtype, seed, max_position=edge + 2 * EDGE_REACH, scale=EDGE_SCALE)
    key = ("context-edge-cache", dtype, seed, edge)
    if key not in ctx.state:
        g = torch.Generator().manual_seed(seed + edge)
        prompt = torch.randint(0, model.config.vocab_size, (edge + EDGE_REACH,), generator=g).tolist()
        one = model.new_cache(1, edge + 2 * EDGE_REACH)
        with torch.no_grad():
            model.prefill([prompt], one)
        ctx.state[key] = one
    one = ctx.state[key]
    starts = [edge - 2, edge - 1, edge] if tokens == 1 else [edge - tokens // 2]
    cache = KVCache(one.c_kv.repeat(1, len(starts), 1, 1), one.k_rope.repeat(1, len(starts), 1, 1))
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, model.config.vocab_size, (len(starts), tokens), generator=g).to(ctx.device)
    positions = (torch.tensor(starts)[:, None] + torch.arange(tokens)[None]).to(ctx.device)
    out: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        out["model"] = model(ids, positions, _clone(cache)).float().cpu()
        stock_cache, cand_cache = _clone(cache), _clone(cache)
        out["stock"] = StockDecoder(model, ctx).forward(ids, positions, stock_cache).float().cpu()
        cand = LatencyDecoder(model, ctx, options_for("all"))
        out["candidate"] = cand.forward(ids, positions, cand_cache).float().cpu()
    out["stock_cache"] = stock_cache.c_kv.float().cpu()
    out["candidate_cache"] = cand_cache.c_kv.float().cpu()
    return out


def fused_vs_unfused(ctx: RankContext, rows: int, dtype: str, seed: int = 0) -> dict[str, torch.Tensor]:
    """The fused o_proj + all-reduce against the private partial + library all-reduce."""
    g = torch.Generator().manual_seed(seed)
    d_in, d_out = 16 * ctx.world_size, 32
    x = torch.randn(rows, d_in, generator=g).to(ctx.device, DTYPES[dtype])
    w = torch.randn(d_out, d_in, generator=g).to(ctx.device, DTYPES[dtype])
    per = d_in // ctx.world_size
    part = slice(ctx.rank * per, (ctx.rank + 1) * per)
    full = torch.nn.functional.linear(x.float(), w.float())
    fused = fused_linear_all_reduce(ctx, x[:, part], w[:, part].contiguous())
    unfused = stock_linear_all_reduce(ctx, x[:, part], w[:, part].contiguous())
    partial_scale = max(float((x[:, slice(r * per, (r + 1) * per)].float() @ w[:, slice(r * per, (r + 1) * per)].float().t())
                              .abs().max()) for r in range(ctx.world_size))
    return {"fused": fused.float().cpu(), "unfused": unfused.float().cpu(), "full_fp32": full.cpu(),
            "partial_scale": partial_scale}


def stress_fused(ctx: RankContext, iterations: int, max_delay_us: int, plant_ordering_bug: bool,
                 seed: int = 0) -> dict[str, object]:
    """Repeat the fused all-reduce with random per-rank delays; count wrong sums, digest all sums.

    Every iteration uses fresh inputs, so a read of a slot before its peers wrote it (stale data
    from two iterations back) gives a wrong sum. The expected sum is the rank-order sum of the
    partials, which every rank can recompute from the shared seed.
    """
    os.environ[DELAY_ENV] = str(max_delay_us)
    digest = hashlib.sha256()
    wrong = 0
    try:
        for i in range(iterations):
            g = torch.Generator().manual_seed(seed * 1_000_003 + i)
            xs = [torch.randn(4, 24, generator=g) for _ in range(ctx.world_size)]
            ws = [torch.randn(16, 24, generator=g) for _ in range(ctx.world_size)]
            got = fused_linear_all_reduce(ctx, xs[ctx.rank], ws[ctx.rank], plant_ordering_bug=plant_ordering_bug)
            expected = rank_order_sum([x @ w.t() for x, w in zip(xs, ws)])
            wrong += int(not torch.equal(got, expected))
            digest.update(got.numpy().tobytes())
    finally:
        os.environ.pop(DELAY_ENV, None)
    return {"wrong": wrong, "digest": digest.hexdigest(), "rank": ctx.rank}


def random_seed_for_delays() -> int:
    return random.randrange(1 << 30)


def decode_step_variants_with_delay(ctx: RankContext, max_delay_us: int, **kwargs) -> dict[str, torch.Tensor]:
    """`decode_step_variants` with random per-rank delays before each fused write."""
    os.environ[DELAY_ENV] = str(max_delay_us)
    try:
        return decode_step_variants(ctx, **kwargs)
    finally:
        os.environ.pop(DELAY_ENV, None)
