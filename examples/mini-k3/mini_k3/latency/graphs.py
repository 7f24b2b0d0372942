"""CUDA graphs for the GPU decode step: one graph per (batch, tokens, cache) shape.

A decode step of this small model is a few hundred tiny kernels, so on a GPU its time is mostly
launch overhead; replaying a captured graph launches them all at once. Capture needs a step with
no host synchronisation: the decoder's ``graph_safe`` form attends over the whole cache with a
mask (instead of reading the longest position back to the host), and the latency path's MoE
uses the dense form on GPU (no ``nonzero``). Off switch: ``LatencyOptions.cuda_graphs`` (env
``MINIK3_LATENCY_DISABLE=cuda_graphs``); off at tensor-parallel size > 1 (not validated there).

A captured graph holds raw device addresses: of its static inputs, its private memory pool and
the KV cache it was captured on (both ``c_kv`` and ``k_rope``). It may therefore only ever be
replayed on that same cache: graphs are keyed by the cache's tensors and the step's shape, and each
keeps its cache's tensors alive (so their memory cannot be handed to another tensor while a graph
may still write it). The engine's runner keeps the caches of its recent shapes and hands a request
of such a shape its cache back, zeroed, so generate calls that alternate shapes (a benchmark's full
and prefill-only requests) replay instead of recapturing. Graphs used to be keyed on
``c_kv.data_ptr()`` (issue #22): the caching allocator hands a new request's cache the freed memory
of an earlier one, so a later request of the same shape could find its ``c_kv`` at an old address
and replay a graph whose ``k_rope`` pointed at freed memory. Then they were tied to one cache at a
time, and every generate call recaptured them (the speculative benchmark slowed down as drafts
grew: 285, 238, 162 tokens/s at draft 1, 4, 7).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

from ..model import KVCache
from .decoder import LatencyDecoder

# Each graph pins its memory pool and its cache: 8 step shapes (1-8 tokens) x the runner's 4 caches.
MAX_GRAPHS = 32


@dataclass
class _Captured:
    graph: torch.cuda.CUDAGraph
    ids: torch.Tensor
    positions: torch.Tensor
    rows: torch.Tensor
    logits: torch.Tensor
    cache: KVCache  # the tensors the graph writes and reads: held, so their memory stays theirs


class GraphedDecoder:
    """Replays captured decode steps of ``decoder`` (CUDA only)."""

    def __init__(self, decoder: LatencyDecoder, max_graphs: int = MAX_GRAPHS) -> None:
        if decoder.ctx.device.type != "cuda":
            raise ValueError("CUDA graphs need a CUDA device")
        self.decoder = decoder
        self.max_graphs = max_graphs
        self._graphs: OrderedDict[tuple, _Captured] = OrderedDict()  # least recently replayed first
        self.captures = 0

    @property
    def techniques(self) -> tuple[str, ...]:
        return (*self.decoder.techniques, "cuda_graphs")

    def __call__(self, ids: torch.Tensor, positions: torch.Tensor, cache: KVCache,
                 cache_rows: torch.Tensor) -> torch.Tensor:
        # id() of a tensor an entry holds cannot be reused while the entry lives; `is` checks it.
        key = (id(cache.c_kv), id(cache.k_rope), tuple(ids.shape))
        entry = self._graphs.get(key)
        if entry is None or entry.cache.c_kv is not cache.c_kv or entry.cache.k_rope is not cache.k_rope:
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
        return _Captured(graph, static[0], static[1], static[2], logits, KVCache(cache.c_kv, cache.k_rope))
