"""What the code-confinement check records: the paths it matched against, the files changed in
base...head, the violations and the gated files changed."""

from __future__ import annotations

from dataclasses import dataclass

from fasttrack.kinds.measurements import Measurements, Record


@dataclass(frozen=True)
class Violation(Record):
    path: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class ScopeDiffMeasurements(Measurements):
    code_paths: tuple[str, ...] | None = None  # model.code_paths
    allowed_paths: tuple[str, ...] | None = None  # model.allowed_paths
    gated_paths: tuple[str, ...] | None = None  # model.gated_paths
    base: str | None = None  # the base commit compared with
    head: str | None = None
    base_source: str | None = None  # how the base was chosen, or why there is none
    changed: tuple[str, ...] | None = None  # every file changed in base...head
    violations: tuple[Violation, ...] | None = None  # changed files outside the paths
    gated: tuple[str, ...] | None = None  # shared files changed behind the switches
