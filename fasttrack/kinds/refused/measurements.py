"""What a refused-combination check records: what was added to the candidate's server, whether
it served, how it exited, and whether its log showed the declared message."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fasttrack.kinds.measurements import Measurements


@dataclass(frozen=True)
class RefusedMeasurements(Measurements):
    switch: str | None = None
    serve_args: tuple[Any, ...] | None = None
    env: Mapping[str, Any] | None = None
    message: str | None = None  # the regular expression the log must show
    served: bool | None = None  # it became healthy: the combination was not refused
    # the code it exited with before it became healthy (None: it did not exit); a number, not a count:
    # a signal gives a negative code
    exit_code: float | None = None
    message_found: bool | None = None
    matched_line: str | None = None
