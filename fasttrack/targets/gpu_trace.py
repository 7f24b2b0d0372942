"""GPU kernels in a torch profiler trace, attributed to the CPU window that launched them.

On a GPU the kernel census counts kernels, not CPU operators: a CUDA-graphed decode step shows a
handful of CPU operators (one ``cudaGraphLaunch``) however many kernels the graph runs, and a
launch-elision change is invisible to an operator count. Kineto writes each launch call
(categories ``cuda_runtime`` / ``cuda_driver``: ``cudaLaunchKernel``, ``cudaGraphLaunch`` ...) on
the CPU timeline and each kernel (category ``kernel``) on its stream's timeline, both with the
same ``args.correlation``; a graph's kernels carry the correlation of the graph launch. A decode
step's kernels are those whose launch call lies inside the step's annotation, wherever on the GPU
timeline they ran (kernels run after their launch, often past the CPU step's end)."""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})


@dataclass(frozen=True)
class StepKernels:
    """The GPU kernels one CPU window launched."""

    names: Counter[str]  # kernel name -> count
    streams: frozenset[Any]  # the CUDA streams they ran on


@dataclass(frozen=True)
class Launches:
    """A trace's launch calls (sorted by start) and the kernels each correlation ran."""

    starts: tuple[float, ...]
    correlations: tuple[Any, ...]
    kernels: Mapping[Any, tuple[tuple[str, Any], ...]]  # correlation -> ((kernel name, stream), ...)

    @classmethod
    def of(cls, events: Sequence[Mapping[str, Any]]) -> Launches | None:
        """None when the trace holds no GPU kernel (a CPU run, or a profiler without CUDA activity)."""
        kernels: dict[Any, list[tuple[str, Any]]] = defaultdict(list)
        for e in events:
            args = e.get("args") or {}
            if e.get("cat") == "kernel" and isinstance(args, Mapping) and "correlation" in args:
                kernels[args["correlation"]].append((str(e.get("name")), args.get("stream")))
        if not kernels:
            return None
        calls = sorted(
            (float(e["ts"]), (e.get("args") or {})["correlation"])
            for e in events
            if e.get("cat") in LAUNCH_CATEGORIES and "ts" in e and "correlation" in (e.get("args") or {})
        )
        return cls(
            tuple(t for t, _ in calls),
            tuple(c for _, c in calls),
            {k: tuple(v) for k, v in kernels.items()},
        )

    def launched_between(self, lo: float, hi: float) -> StepKernels:
        names: Counter[str] = Counter()
        streams: set[Any] = set()
        first, last = bisect.bisect_left(self.starts, lo), bisect.bisect_right(self.starts, hi)
        for correlation in self.correlations[first:last]:
            for name, stream in self.kernels.get(correlation, ()):
                names[name] += 1
                streams.add(stream)
        return StepKernels(names, frozenset(streams))
