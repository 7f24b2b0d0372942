"""Technique 4: the next layer's weights read ahead while the feed-forward all-reduce runs.

Each layer's latency-path weights live in one flat buffer (`pack_flat`), so reading them ahead
is one operation. GPU: one reduction kernel over the buffer on a side stream (pulls it into L2),
ordered after the main stream's work so far and joined back with an event before the next
layer. CPU: a helper thread sums the buffer (pulls it into the caches) while the rank waits in
the all-reduce; the effect is small on CPU (the buffers are a few hundred KB) and is measured,
not assumed, in benchmarks/latency_path.py.

Off switch: ``LatencyOptions.prefetch`` (env ``MINIK3_LATENCY_DISABLE=prefetch``). It needs
communication to hide behind, so it only runs at tensor-parallel size > 1 unless
``LatencyOptions.prefetch_without_comm`` (the tests use that to check it at TP 1).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import torch

T = TypeVar("T")


class Prefetcher:
    """Reads a flat weight buffer while a communication call runs (see `during`)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._future: Future | None = None
        if device.type == "cuda":
            self.stream = torch.cuda.Stream(device)
            self.event = torch.cuda.Event()
            self.sink = torch.zeros((), device=device, dtype=torch.float32)
        else:
            self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minik3-prefetch")

    def start(self, flat: torch.Tensor) -> None:
        if self.device.type == "cuda":
            # after everything queued so far, so the read never races a write of the buffer
            self.stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self.stream):
                # the full reduction has no out= overload; dim=0 of the flat buffer does (no allocation)
                torch.sum(flat, dim=0, dtype=torch.float32, out=self.sink)
                self.event.record(self.stream)
        else:
            self._future = self.pool.submit(lambda: float(flat.sum()))

    def wait(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).wait_event(self.event)
        elif self._future is not None:
            self._future.result()
            self._future = None

    def during(self, flat: torch.Tensor | None, communicate: Callable[[], T]) -> T:
        """``communicate()``, with ``flat`` (the next layer's buffer; None: last layer) read meanwhile."""
        if flat is None:
            return communicate()
        self.start(flat)
        result = communicate()
        self.wait()
        return result


def pack_flat(shard: Any, names: list[str]) -> None:
    """Move the named weights of ``shard`` (tensors, tuples or lists of tuples of tensors) into one
    flat buffer ``shard.flat`` and point the fields at views of it."""
    tensors = []
    for name in names:
        value = getattr(shard, name)
        if isinstance(value, list):
            tensors.extend(t for pair in value for t in pair)
        elif isinstance(value, tuple):
            tensors.extend(value)
        elif value is not None:
            tensors.append(value)
    flat = torch.cat([t.reshape(-1) for t in tensors])
    views = iter(torch.split(flat, [t.numel() for t in tensors]))

    def view_like(t: torch.Tensor) -> torch.Tensor:
        return next(views).view(t.shape)

    for name in names:
        value = getattr(shard, name)
        if isinstance(value, list):
            setattr(shard, name, [tuple(view_like(t) for t in pair) for pair in value])
        elif isinstance(value, tuple):
            setattr(shard, name, tuple(view_like(t) for t in value))
        elif value is not None:
            setattr(shard, name, view_like(value))
    shard.flat = flat
