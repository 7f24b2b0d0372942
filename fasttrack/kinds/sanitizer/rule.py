"""Sanitizer audits: a sanitizer audit passes only with no error reported."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.reading import Subject, status
from fasttrack.kinds.sanitizer.measurements import SanitizerMeasurements


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    state = status(outcome)
    errors = SanitizerMeasurements.of(outcome).errors
    if state == "passed" and errors != ():
        if errors is not None:
            return [f"passed, but the sanitizer reported {len(errors)} error(s)"]
        return ["passed, but it records no sanitizer result (measurements.errors)"]
    if state == "failed" and not errors:
        return ["failed, but it records no sanitizer error"]
    return []
