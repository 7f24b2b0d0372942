"""Kernel micro-benchmarks inside kernel tests: time a candidate op against its reference op per
shape, in interleaved pairs, and record the per-call times for the evidence.

    from fasttrack.kernel_bench import bench

    @pytest.mark.fasttrack_scope("batch", "dtype")
    def test_fused_rms_norm(scope_point):
        x, w = ...
        assert_close_recorded(fused(x, w), reference(x, w), dtype=scope_point["dtype"])
        bench(lambda: fused(x, w), lambda: reference(x, w), name="rms_norm", shape=tuple(x.shape))

(the pytest plugin's ``fasttrack_bench`` fixture is the same function). Each op is called
``warmup`` times, then the number of calls per timed block is calibrated so that a block takes at
least ``min_block_s``; then ``pairs`` pairs of blocks are timed in counterbalanced order (candidate
first in even pairs, reference first in odd ones: AB BA AB ...), so drift of the machine hits both
sides alike. A block is timed with CUDA events and a synchronise on a CUDA device (``device``:
"cuda", or auto where torch has initialised CUDA), with ``time.perf_counter`` on the CPU. The
recorder keeps each pair's time per call of both ops; the kernels check turns them into the
median time per call of each, the median per-pair speed-up (reference ÷ candidate) and the time
saved per call (reference - candidate), each with exact sign-test bounds
(`fasttrack.kinds.kernels.micro`). Outside pytest (or without the plugin) it times and records
nothing beyond its return value. No numpy, no scipy here: the plugin imports no heavy module.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_PAIRS = 21
DEFAULT_WARMUP = 3
MIN_BLOCK_S = {"cpu": 1e-3, "cuda": 2e-4}  # a timed block at least this long (timer resolution, launch jitter)
MAX_CALLS = 10_000  # calls per timed block at most


@dataclass(frozen=True)
class MicroBench:
    """One micro-benchmark as timed: per pair, the time per call (seconds) of each op."""

    name: str
    shape: str
    device: str
    timer: str
    calls: int  # calls per timed block
    warmup: int
    candidate_s: tuple[float, ...]
    reference_s: tuple[float, ...]

    @property
    def candidate_us(self) -> float:
        return statistics.median(self.candidate_s) * 1e6

    @property
    def reference_us(self) -> float:
        return statistics.median(self.reference_s) * 1e6

    @property
    def speedup(self) -> float:
        """Median of the per-pair ratios reference ÷ candidate (> 1: the candidate is faster)."""
        return statistics.median(r / c if c > 0 else math.inf for r, c in zip(self.reference_s, self.candidate_s))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shape": self.shape,
            "device": self.device,
            "timer": self.timer,
            "calls": self.calls,
            "warmup": self.warmup,
            "candidate_s": list(self.candidate_s),
            "reference_s": list(self.reference_s),
        }


def shape_label(shape: Any) -> str:
    """'8x4096' for (8, 4096) or a torch.Size, 'batch=8,hidden=64' for a mapping, str otherwise."""
    if shape is None:
        return ""
    if isinstance(shape, str):
        return shape
    if isinstance(shape, Mapping):
        return ",".join(f"{k}={v}" for k, v in shape.items())
    if isinstance(shape, Sequence) or hasattr(shape, "__iter__"):
        return "x".join(str(int(s)) if isinstance(s, int) or hasattr(s, "__index__") else str(s) for s in shape)
    return str(shape)


def _cuda_in_use(device: str | None) -> bool:
    if device is not None:
        return str(device).startswith("cuda")
    torch = sys.modules.get("torch")  # only where the test itself imported torch
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())


def _block_timer(cuda: bool) -> Callable[[Callable[[], Any], int], float]:
    """A function timing ``calls`` calls of an op: seconds per call."""
    if cuda:
        import torch

        def timed_cuda(op: Callable[[], Any], calls: int) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(calls):
                op()
            end.record()
            torch.cuda.synchronize()
            return float(start.elapsed_time(end)) / 1e3 / calls

        return timed_cuda

    def timed_cpu(op: Callable[[], Any], calls: int) -> float:
        t0 = time.perf_counter()
        for _ in range(calls):
            op()
        return (time.perf_counter() - t0) / calls

    return timed_cpu


def time_pairs(
    candidate: Callable[[], Any],
    reference: Callable[[], Any],
    *,
    name: str,
    shape: Any = None,
    pairs: int = DEFAULT_PAIRS,
    warmup: int = DEFAULT_WARMUP,
    device: str | None = None,
    min_block_s: float | None = None,
    calls: int | None = None,
) -> MicroBench:
    """Time ``candidate`` against ``reference`` (zero-argument callables) in ``pairs`` interleaved pairs."""
    if pairs < 1:
        raise ValueError("pairs must be at least 1")
    cuda = _cuda_in_use(device)
    timed = _block_timer(cuda)
    for _ in range(max(0, warmup)):
        candidate()
        reference()
    if calls is None:
        floor = min_block_s if min_block_s is not None else MIN_BLOCK_S["cuda" if cuda else "cpu"]
        one = max(timed(candidate, 1), timed(reference, 1), 1e-9)
        calls = max(1, min(MAX_CALLS, math.ceil(floor / one)))
    cand: list[float] = []
    ref: list[float] = []
    for i in range(pairs):
        if i % 2 == 0:
            cand.append(timed(candidate, calls))
            ref.append(timed(reference, calls))
        else:
            ref.append(timed(reference, calls))
            cand.append(timed(candidate, calls))
    return MicroBench(
        name=name,
        shape=shape_label(shape),
        device="cuda" if cuda else "cpu",
        timer="cuda_events" if cuda else "perf_counter",
        calls=calls,
        warmup=max(0, warmup),
        candidate_s=tuple(cand),
        reference_s=tuple(ref),
    )


def bench(candidate: Callable[[], Any], reference: Callable[[], Any], **options: Any) -> MicroBench:
    """`time_pairs`, recorded on the running test (the plugin's recorder) when there is one."""
    from fasttrack import kernel_testing

    result = time_pairs(candidate, reference, **options)
    recorder = kernel_testing.current_recorder()
    if recorder is not None:
        recorder.record_micro_benchmark(result.to_dict())
    return result
