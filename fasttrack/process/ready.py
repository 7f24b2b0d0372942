"""Waiting for a started server: a free localhost port to give it, and polling until it answers
(or exits, or its startup time runs out)."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Readiness:
    """How waiting ended: ``ready``, or the process's exit code (it ended first), or neither (the
    time ran out; ``last`` says what the last poll saw)."""

    ready: bool
    exit_code: int | None
    last: str


def wait_ready(
    poll: Callable[[], str | None],
    timeout_s: float,
    process: subprocess.Popen | None = None,
    every_s: float = 0.2,
) -> Readiness:
    """Call ``poll`` (None: ready; else what it saw) until it answers ready, ``process`` exits, or
    ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            return Readiness(False, process.returncode, last)
        seen = poll()
        if seen is None:
            return Readiness(True, None, "ready")
        last = seen
        time.sleep(every_s)
    return Readiness(False, None, last)
