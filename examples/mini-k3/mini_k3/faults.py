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
"""

from __future__ import annotations

from typing import Any

import torch

from mini_k3.fasttrack_target import TECHNIQUE_KEYWORDS, MiniK3Target
from mini_k3.fasttrack_target import create as create_target
from mini_k3.latency import LatencyDecoder, options_from_env
from mini_k3.model import ABSORBED_MAX_TOKENS, KVCache, MiniK3
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


def plant_long_context_bug(model: MiniK3, after: int) -> None:
    """Route ``model``'s latency-path decode steps through `ShortWindowDecoder` (this instance only)."""
    decoder = ShortWindowDecoder(model, after)
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


def create(long_context_bug_after: int | None = None, **options: Any) -> MiniK3Target:
    """The example's target factory, with the long-context bug on the candidate side only.

    ``options`` are the `Engine` keyword arguments (``latency_specialized``, ``device`` ...).
    """
    on = bool(options.get("latency_specialized")) or any(options.get(name) for name in TECHNIQUE_KEYWORDS)
    planted = long_context_bug_after is not None and on
    if planted and int(options.get("tensor_parallel_size", 1) or 1) != 1:
        raise ValueError("the planted long-context bug is in-process only (tensor_parallel_size 1)")
    target = create_target(**options)
    if planted:
        plant_long_context_bug(target.engine.model, int(long_context_bug_after))
    return target
