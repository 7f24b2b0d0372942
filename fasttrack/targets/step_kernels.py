"""The device kernels a profiled step launched. A kernel event (``cat: kernel``) runs on the
device after, and apart from, the host call that launched it, so its own timestamps do not say
which step it belongs to: the launch does. Each kernel carries the ``args.correlation`` of its
launch (``cat: cuda_runtime`` or ``cuda_driver``: ``cudaLaunchKernel``, ``cuLaunchKernel``,
``hipLaunchKernel``, and ``cudaGraphLaunch`` / ``hipGraphLaunch`` for every kernel of a replayed
graph), and a kernel belongs to the step whose window holds its launch. A trace without kernel
events (a CPU run, a profiler without the GPU activity) gives none."""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})


@dataclass(frozen=True)
class Launches:
    """The trace's launch calls by start time, and the kernels launched per correlation id."""

    starts: list[float]
    correlations: list[Any]
    kernels: Mapping[Any, list[str]]

    def within(self, lo: float, hi: float) -> Counter[str]:
        """The kernels launched by calls that start in [lo, hi], by name."""
        found: Counter[str] = Counter()
        first, last = bisect.bisect_left(self.starts, lo), bisect.bisect_right(self.starts, hi)
        for correlation in self.correlations[first:last]:
            found.update(self.kernels.get(correlation, ()))
        return found


def launches(events: Sequence[Mapping[str, Any]]) -> Launches:
    kernels: dict[Any, list[str]] = defaultdict(list)
    calls: list[tuple[float, Any]] = []
    for e in events:
        correlation = (e.get("args") or {}).get("correlation") if isinstance(e.get("args"), Mapping) else None
        if correlation is None:
            continue
        if e.get("cat") == "kernel":
            kernels[correlation].append(str(e.get("name")))
        elif e.get("cat") in LAUNCH_CATEGORIES and "ts" in e:
            calls.append((float(e["ts"]), correlation))
    calls.sort(key=lambda c: c[0])
    return Launches([t for t, _ in calls], [c for _, c in calls], dict(kernels))
