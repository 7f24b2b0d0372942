"""What the parrot kind records: what it asked the process to say and what came back."""

from __future__ import annotations

from dataclasses import dataclass

from fasttrack.kinds.measurements import Measurements


@dataclass(frozen=True)
class ParrotMeasurements(Measurements):
    said: str | None = None  # what the process was asked to print
    heard: str | None = None  # what it printed
    returncode: int | None = None
