"""Waiting on a readiness signal (a file written, a process gone), with an upper bound."""

from __future__ import annotations

import time
from collections.abc import Callable

WAIT_S = 120.0  # upper bound for a loaded CI machine; the waits end as soon as the signal is there


def wait_for(condition: Callable[[], object], what: str, timeout: float = WAIT_S) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)  # the poll interval of the check, not a wait for something to happen
