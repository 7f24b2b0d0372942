"""Planted candidate bugs, for the gate's own acceptance tests (never used by the engine itself).

``long_context_bug_after=P``: the latency path's decode attention reads only the first ``P`` key
slots of the latent cache, the way a kernel whose key-tile loop was sized for a short context
would. A decode query before position ``P`` is untouched (bit for bit the real path), so kernel
tests with short inputs pass; a query at or past ``P`` loses every key from ``P`` on, including
the end of a long prompt, and its own key overwrites slot ``P - 1`` (the clamped write of the
same kernel). This is the class of bug the source article's long-context evaluations caught and
mock-input kernel tests missed.

The bug is planted by wrapping one engine's model instance, in-process and at tensor-parallel
size 1 on eager devices (the CUDA-graph decoder is bypassed); the stock path never sees it.

The faults of the soundness classes (issue #17), each planted on the candidate's engine only, at
tensor-parallel size 1 (``create`` options), or in the kernel tests' process
(``MINIK3_PLANTED_FAULT``, read by ``tests/kernels/conftest.py``):

``path_fallback_above=B``: at batch sizes above B the candidate's decode steps run the stock path
while its path counter still counts ``latency_specialized`` (a lying counter); the kernel census
at a benchmarked point above B equals stock's.

``slow_at_batch=B`` (with ``slowdown=F``, default 1.3): the candidate's decode steps at batch size B
take F times as long (the step's own time, F - 1 more, spent waiting: a redundant copy or an extra
synchronisation), correct output.

``bad_token_id=X``: the candidate's decode steps give non-finite logits for a row fed token X (a
bad embedding row on the latency path's lookup); every other id is untouched.

``MINIK3_PLANTED_FAULT=kernel_wrong_between``: the latency decoder's step is wrong in the last row
at batch sizes 33..63 that are not multiples of 8 (a kernel variant chosen between the declared
points 32 and 64, as a tile-size heuristic would), right at every declared point.

The fault of the dtype x position class (issue #34), on the candidate's engine (``create`` option)
or in the kernel tests' process (``MINIK3_PLANTED_FAULT=mask_in_model_dtype``):

``mask_in_model_dtype=True``: the latency path's decode attention builds its mask in the model's
dtype, ``slot < position + 1`` compared as numbers of that dtype (as a kernel that makes its mask
from a float iota in the activation dtype would). bf16 has 8 significant bits: integers above 256
round to even numbers, above 512 to multiples of 4, and so on, so past position 256 a query loses
its own key or its latest ones (a tie rounds to even) and the loss grows with the position. fp32
holds every integer up to 2**24 exactly: there the mask, and so the whole step, is bit for bit the
real one, and so is every bf16 step before position 256 (kernel tests with short caches pass).

The faults of the mixed-batch and drafter classes (issue #34), on the candidate's engine only
(``create`` options, any tensor-parallel size: they live in the engine, above the ranks):

``first_row_sampling=True``: the candidate's batch sampler leaks per-request parameters across
rows: every row of a step (the prefill's first token and each decode step) is sampled with the
temperature and top_p of the step's first live row. Each request sent alone, or a batch of alike
requests, is served right, so every probe that sends one kind of request at a time passes; a
mixed batch samples its sampled rows greedily when a greedy row leads it (the seeds, max_tokens,
stop strings, logprobs and schemas of the rows stay their own).

``draft_off_by_one=True``: the candidate's n-gram drafter proposes the continuation one token
late (the tokens after the one that followed the suffix's latest earlier match) at two of every
three drafting steps, the third right. Verification rejects what the model does not pick, so
greedy output stays equal to plain decoding; only the acceptance length drops: on the speculative
check's shipped prompts from stock's 1.75 (draft length 1) and 2.04 (2-7) to 1.32-1.52, 71-79 % of
stock's whatever the phase of the three, above the example's floor of 1.2. The comparison with
stock (at least 90 % of its acceptance length) fails it, the floor alone passes it. (Late at every
step the acceptance length is 1.03, which the floor catches too.)
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from mini_k3.engine import Engine
from mini_k3.fasttrack_target import TECHNIQUE_KEYWORDS, MiniK3Target
from mini_k3.fasttrack_target import create as create_target
from mini_k3.latency import LatencyDecoder, options_from_env
from mini_k3.latency.kernel_choice import rms_norm_fused
from mini_k3.model import ABSORBED_MAX_TOKENS, KVCache, MiniK3, apply_rope
from mini_k3.model_runner import LATENCY_PATH
from mini_k3.parallel import single_rank


class ShortWindowDecoder(LatencyDecoder):
    """The latency decoder with decode attention limited to the first ``window`` cache slots."""

    def __init__(self, model: MiniK3, window: int) -> None:
        super().__init__(model, single_rank(next(model.parameters()).device), options_from_env())
        if window < 1:
            raise ValueError("the bug's window must be at least one position")
        self.window = int(window)

    def _attend(self, i, s, q, c_kv, k_rope, positions, cos, sin, cache, rows, graph_safe):
        correct = super()._attend(i, s, q, c_kv, k_rope, positions, cos, sin, cache, rows, graph_safe)
        w = self.window
        if int(positions.max()) < w:
            return correct
        # What the buggy kernel computes: the same attention over a cache of only w slots, the
        # step's own key written at the clamped slot w - 1. Indexing by rows copies, so the real
        # cache stays right.
        short = KVCache(cache.c_kv[i : i + 1, rows, :w], cache.k_rope[i : i + 1, rows, :w])
        local_rows = torch.arange(len(rows), device=rows.device)
        buggy = super()._attend(0, s, q, c_kv, k_rope, positions.clamp(max=w - 1), cos, sin, short, local_rows,
                                False)
        return torch.where((positions >= w)[:, :, None], buggy, correct)


def attend_latent_mask_in(mask_dtype: torch.dtype, c, s, i, q_nope, q_rope, c_kv, k_rope, positions, cache, rows,
                          graph_safe):
    """`mini_k3.tensor_parallel.attend_latent` with the mask compared in ``mask_dtype`` (the fault)."""
    B, T = positions.shape
    hl = s.local_heads
    cache_c, cache_r = cache.c_kv[i], cache.k_rope[i]
    slot_rows = rows[:, None].expand_as(positions)
    cache_c[slot_rows, positions] = c_kv.to(cache_c.dtype)
    cache_r[slot_rows, positions] = k_rope.to(cache_r.dtype)
    span = cache.max_len if graph_safe else int(positions.max()) + 1
    keys_c = cache_c[rows, :span].to(q_nope.dtype)
    keys_r = cache_r[rows, :span].to(q_nope.dtype)
    slots = torch.arange(span, device=positions.device).to(mask_dtype)
    mask = slots[None, None, :] < (positions + 1).to(mask_dtype)[:, :, None]  # the fault: rounded integers
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


def _attend_mask_in_model_dtype(self, i, s, q, c_kv, k_rope, positions, cos, sin, cache, rows, graph_safe):
    """`LatencyDecoder._attend` (same preparation) over `attend_latent_mask_in` the model's dtype."""
    c = self.config
    B, T = positions.shape
    hl = s.local_heads
    q = q.view(B, T, hl, c.qk_head_dim)
    q_nope, q_rope = q.split([c.qk_nope_head_dim, c.qk_rope_head_dim], dim=-1)
    rotated = apply_rope(torch.cat([q_rope, k_rope[:, :, None, :]], dim=2), cos, sin)
    q_rope, k_rope = rotated[:, :, :hl], rotated[:, :, hl]
    c_kv = rms_norm_fused(c_kv, s.kv_a_norm, c.rms_eps)
    return attend_latent_mask_in(q_nope.dtype, c, s, i, q_nope, q_rope, c_kv, k_rope, positions, cache, rows,
                                 graph_safe)


class ModelDtypeMaskDecoder(LatencyDecoder):
    """The latency decoder with its attention mask built in the model's dtype (module docstring)."""

    def __init__(self, model: MiniK3) -> None:
        super().__init__(model, single_rank(next(model.parameters()).device), options_from_env())

    _attend = _attend_mask_in_model_dtype


def plant_mask_in_model_dtype() -> None:
    """Every latency decoder of this process builds its mask in the model's dtype (the kernel tests')."""
    LatencyDecoder._attend = _attend_mask_in_model_dtype  # type: ignore[method-assign]


def plant_long_context_bug(model: MiniK3, after: int) -> None:
    """Route ``model``'s latency-path decode steps through `ShortWindowDecoder` (this instance only)."""
    route_latency_decode(model, ShortWindowDecoder(model, after))


def route_latency_decode(model: MiniK3, decoder: LatencyDecoder) -> None:
    """Route ``model``'s latency-path decode steps through ``decoder`` (this instance only)."""
    real_forward = model.forward

    def forward(input_ids, positions=None, cache=None, cache_rows=None, latency_specialized: bool = False,
                latency_options=None):
        if latency_specialized and cache is not None and positions is not None \
                and input_ids.shape[1] <= ABSORBED_MAX_TOKENS:
            if cache_rows is None:
                cache_rows = torch.arange(input_ids.shape[0], device=input_ids.device)
            return decoder.forward(input_ids, positions, cache, cache_rows)
        return real_forward(input_ids, positions, cache, cache_rows, latency_specialized=latency_specialized,
                            latency_options=latency_options)

    model.forward = forward  # type: ignore[method-assign]


def plant_runner_faults(engine: Engine, fallback_above: int | None, slow_at_batch: int | None,
                        slowdown: float, bad_token_id: int | None) -> None:
    """Wrap ``engine``'s (TP 1) runner: the decode-step faults of the module docstring."""
    runner = engine.runner
    real = runner.forward

    def forward(ids, positions, decode, cache_rows=None, select=None):
        batch = int(ids.shape[0])
        if decode and fallback_above is not None and batch > fallback_above:
            runner.latency_specialized = False  # the stock path runs ...
            try:
                logits, _path, _none = real(ids, positions, decode, cache_rows, select)
            finally:
                runner.latency_specialized = True
            from mini_k3.latency import active_techniques

            # ... and the counters say otherwise: the latency path, with every technique it claims
            return logits, LATENCY_PATH, active_techniques(runner.model, runner.latency_options)
        started = time.perf_counter()
        logits, path, techniques = real(ids, positions, decode, cache_rows, select)
        if decode and slow_at_batch is not None and batch == slow_at_batch:
            time.sleep((slowdown - 1.0) * (time.perf_counter() - started))
        if decode and bad_token_id is not None and select is None:
            hit = (ids == bad_token_id).to(logits.device)
            if bool(hit.any()):
                logits = logits.masked_fill(hit[..., None], float("nan"))
        return logits, path, techniques

    runner.forward = forward  # type: ignore[method-assign]


def plant_kernel_wrong_between(low: int = 33, high: int = 63, multiple: int = 8) -> None:
    """The latency decoder's step wrong in its last row at batch sizes low..high that are not
    multiples of ``multiple`` (in this process: the kernel tests' TP 1 ranks)."""
    from mini_k3.tensor_parallel import StockDecoder

    def forward(self, ids, positions, cache, cache_rows=None, graph_safe=False):
        logits = StockDecoder.forward(self, ids, positions, cache, cache_rows, graph_safe)
        batch = int(ids.shape[0])
        if low <= batch <= high and batch % multiple:
            logits = logits.clone()
            logits[-1] = logits[-1] + 0.05 * logits[-1].abs().mean()
        return logits

    LatencyDecoder.forward = forward  # type: ignore[method-assign]


def plant_first_row_sampling(engine: Engine) -> None:
    """``engine``'s steps sample every live row with the first live row's temperature and top_p."""

    def leaking(step: Callable[..., Any]) -> Callable[..., Any]:
        def run(sequences: list[Any], *args: Any) -> Any:
            live = [s for s in sequences if not s.done]
            own = [s.params for s in live]
            for s in live:
                s.params = live[0].params  # the leak: the step's sampler reads one row's parameters
            try:
                return step(sequences, *args)
            finally:
                for s, params in zip(live, own):
                    s.params = params

        return run

    engine._prefill = leaking(engine._prefill)  # type: ignore[method-assign]
    engine._decode_step = leaking(engine._decode_step)  # type: ignore[method-assign]


def late_drafter(propose: Callable[..., list[int]], late: int = 2, of: int = 3) -> Callable[..., list[int]]:
    """``propose`` one token late at ``late`` of every ``of`` calls: the tokens after the one that
    followed the match (the same proposal asked for one token more, less its first)."""
    calls = itertools.count()

    def draft(tokens: Sequence[int], num_tokens: int, *args: Any, **kwargs: Any) -> list[int]:
        if num_tokens > 0 and next(calls) % of < late:
            return propose(tokens, num_tokens + 1, *args, **kwargs)[1:]
        return propose(tokens, num_tokens, *args, **kwargs)

    return draft


KERNEL_TEST_FAULTS = {"kernel_wrong_between": plant_kernel_wrong_between,
                      "mask_in_model_dtype": plant_mask_in_model_dtype}


def create(long_context_bug_after: int | None = None, path_fallback_above: int | None = None,
           slow_at_batch: int | None = None, slowdown: float = 1.3, bad_token_id: int | None = None,
           mask_in_model_dtype: bool = False, first_row_sampling: bool = False, draft_off_by_one: bool = False,
           **options: Any) -> MiniK3Target:
    """The example's target factory, with the planted faults on the candidate side only.

    ``options`` are the `Engine` keyword arguments (``latency_specialized``, ``device`` ...).
    """
    # the candidate: the whole latency path, or any of its techniques as a switch of its own
    candidate = bool(options.get("latency_specialized")) or any(options.get(name) for name in TECHNIQUE_KEYWORDS)
    runner_faults = (path_fallback_above, slow_at_batch, bad_token_id)
    decoder_faults = long_context_bug_after is not None or mask_in_model_dtype
    planted = candidate and (decoder_faults or any(f is not None for f in runner_faults))
    if planted and int(options.get("tensor_parallel_size", 1) or 1) != 1:
        raise ValueError("the planted faults are in-process only (tensor_parallel_size 1)")
    target = create_target(**options)
    if candidate and long_context_bug_after is not None:
        plant_long_context_bug(target.engine.model, int(long_context_bug_after))
    if candidate and mask_in_model_dtype:
        route_latency_decode(target.engine.model, ModelDtypeMaskDecoder(target.engine.model))
    if candidate and any(f is not None for f in runner_faults):
        plant_runner_faults(target.engine, path_fallback_above, slow_at_batch, float(slowdown), bad_token_id)
    if candidate and first_row_sampling:
        plant_first_row_sampling(target.engine)
    if candidate and draft_off_by_one:
        target.engine.propose_draft = late_drafter(target.engine.propose_draft)
    return target
