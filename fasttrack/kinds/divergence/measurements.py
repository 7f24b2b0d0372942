"""What the divergence check records: per context bucket the positions compared, KL of the
baseline's next-token distribution to the candidate's (mean, 99th percentile, max) and top-1
agreement; the thresholds it judged with; non-finite logits per side."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fasttrack.kinds.measurements import Measurements, Record


@dataclass(frozen=True)
class Bucket(Record):
    name: str | None = None
    lo: int | None = None
    hi: int | None = None  # None: the open last bucket
    positions: int | None = None
    mean_kl: float | None = None  # None: not finite
    p99_kl: float | None = None
    max_kl: float | None = None
    top1_agreement: float | None = None
    passed: bool | None = None
    problems: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class DivergenceMeasurements(Measurements):
    status: str | None = None  # the comparison's own word
    reason: str | None = None
    prompts: int | None = None
    positions: int | None = None
    thresholds: Mapping[str, Any] = field(default_factory=dict)  # the limits it judged with
    non_finite_positions: Mapping[str, Any] = field(default_factory=dict)  # side -> positions
    buckets: tuple[Bucket, ...] | None = None
