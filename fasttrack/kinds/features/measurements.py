"""What a preserved-feature probe records: the probe, its statistic and p-value where it tests
one, and its own details (what it compared)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fasttrack.kinds.measurements import Measurements


@dataclass(frozen=True)
class FeatureMeasurements(Measurements):
    probe: str | None = None  # the feature probed (the outcome's name)
    statistic: float | None = None
    p_value: float | None = None
    details: Mapping[str, Any] | None = field(default=None)  # the probe's own record
