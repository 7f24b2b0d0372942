"""What the sanitizer audit records: the compute-sanitizer tools it ran and the errors they reported."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fasttrack.kinds.measurements import Measurements


@dataclass(frozen=True)
class SanitizerMeasurements(Measurements):
    tool: str | None = None  # the tools run, comma-separated
    errors: tuple[Any, ...] | None = None  # one line per tool that reported a hazard
