"""The pass rule of a refused combination (the runner's and `fasttrack verify`'s): the server did
not serve, exited by itself with a non-zero code, and its log showed the declared message."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.reading import Subject, status
from fasttrack.kinds.refused.measurements import RefusedMeasurements


def refused(m: RefusedMeasurements) -> bool:
    return m.served is False and m.exit_code is not None and m.exit_code != 0 and m.message_found is True


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    m = RefusedMeasurements.of(outcome)
    state = status(outcome)
    if state == "passed" and not refused(m):
        return [
            f"passed, but the server did not refuse with the message (served {m.served}, exit code "
            f"{m.exit_code}, message found {m.message_found})"
        ]
    if state == "failed" and refused(m):
        return ["failed, but the server exited non-zero with the declared message before it served"]
    return []
