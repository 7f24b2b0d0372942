"""What a benchmark outcome records: the metric, both sides' runs and medians, the speed-up (the
median of the per-pair ratios) and its one-sided bounds, the rule it was judged by (not slower than
stock by more than a margin, or a promised speed-up) and at which alpha, the kernel census of both sides, and labels for
synthetic conditions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fasttrack.kinds.measurements import Comparable, Measurements


@dataclass(frozen=True)
class BenchmarkMeasurements(Measurements):
    metric: str | None = None
    unit: str | None = None
    point: Mapping[str, Any] | None = None
    baseline: Any = None  # {"median", "runs"} (a vllm_bench or sglang_bench side: the median of every field)
    candidate: Any = None
    ratio: float | None = None  # the speed-up: median of the per-pair ratios (> 1: faster)
    ratio_ci: tuple[float | None, ...] | None = None  # its one-sided (1 - alpha) lower and upper bounds
    pair_ratios: tuple[float | None, ...] | None = None
    pairs: int | None = None
    max_pairs: int | None = None
    margin: float | None = None  # "not slower than stock" by more than this share
    rule: str | None = None  # not slower than stock | promised speed-up | census
    promise: float | None = None  # the promised speed-up it was judged against
    alpha: float | None = None
    interval: str | None = None  # how the bounds were made
    pairs_needed: int | None = None
    kernel_census: Mapping[str, Any] | None = None  # side -> census (kernels and time per layer)
    labels: tuple[str, ...] | None = None
    max_concurrency: int | None = None  # a vllm_bench / sglang_bench run's concurrency

    @property
    def bounds(self) -> tuple[float | None, float | None]:
        """(low, high) of ``ratio_ci`` when it records two; (None, None) otherwise."""
        ci = self.ratio_ci
        return (ci[0], ci[1]) if ci is not None and len(ci) == 2 else (None, None)

    def compared(self) -> Comparable | None:
        return Comparable("speed-up", self.ratio, self.ratio_ci)
