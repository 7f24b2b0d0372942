"""CUDA graphs for the GPU decode step: one graph per (batch, tokens, cache) shape.

A decode step of this small model is a few hundred tiny kernels, so on a GPU its time is mostly
launch overhead; replaying a captured graph launches them all at once. Capture needs a step with
no host synchronisation: the decoder's ``graph_safe`` form attends over the whole cache with a
mask (instead of reading the longest position back to the host), and the latency path's MoE
uses the dense form on GPU (no ``nonzero``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

from ..model import KVCache
from .decoder import ShardedDecoder

MAX_GRAPHS = 8  # each graph pins its memory pool; a new cache (one per generate call) recaptures


@dataclass
class _Captured:
    graph: torch.cuda.CUDAGraph
    ids: torch.Tensor
    positions: torch.Tensor
    rows: torch.Tensor
    logits: torch.Tensor


class GraphedDecoder:
    """Replays captured decode steps of ``decoder`` (CUDA only)."""

    def __init__(self, decoder: ShardedDecoder, max_graphs: int = MAX_GRAPHS) -> None:
        if decoder.ctx.device.type != "cuda":
            raise ValueError("CUDA graphs need a CUDA device")
        self.decoder = decoder
        self.max_graphs = max_graphs
        self._graphs: OrderedDict[tuple, _Captured] = OrderedDict()
        self.captures = 0

    def __call__(self, ids: torch.Tensor, positions: torch.Tensor, cache: KVCache,
                 cache_rows: torch.Tensor) -> torch.Tensor:
        key = (tuple(ids.shape), cache.c_kv.data_ptr(), tuple(cache.c_kv.shape), cache.c_kv.dtype)
        entry = self._graphs.get(key)
        if entry is None:
            entry = self._capture(ids, positions, cache, cache_rows)
            self._graphs[key] = entry
            while len(self._graphs) > self.max_graphs:
                self._graphs.popitem(last=False)
        else:
            self._graphs.move_to_end(key)
        entry.ids.copy_(ids)
        entry.positions.copy_(positions)
        entry.rows.copy_(cache_rows)
        entry.graph.replay()
        return entry.logits.clone()

    def _capture(self, ids, positions, cache, cache_rows) -> _Captured:
        # The static inputs start as the real ones, so the warm-up and capture runs write exactly
        # the cache slots the real step writes, with the same values.
        static = [t.clone() for t in (ids, positions, cache_rows)]
        side = torch.cuda.Stream(ids.device)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):  # warm up: Triton compilation, cuBLAS workspaces, allocator
                self.decoder.forward(*static[:2], cache, static[2], graph_safe=True)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            logits = self.decoder.forward(*static[:2], cache, static[2], graph_safe=True)
        self.captures += 1
        return _Captured(graph, static[0], static[1], static[2], logits)
