"""The pass rule (the runner's and `fasttrack verify`'s): the process ended cleanly and echoed
what it was asked to say."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.reading import Subject, status
from support.parrot_kind.measurements import ParrotMeasurements


def echoed(m: ParrotMeasurements) -> bool:
    return m.returncode == 0 and m.said is not None and m.heard == m.said


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    m = ParrotMeasurements.of(outcome)
    if status(outcome) == "passed" and not echoed(m):
        return [f"passed, but it heard {m.heard!r} for {m.said!r}"]
    if status(outcome) == "failed" and echoed(m):
        return ["failed, but the process echoed what it was asked"]
    return []
