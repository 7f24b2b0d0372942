"""Signals during a run: SIGTERM (CI cancelling a job) ends it like Ctrl-C; a second Ctrl-C
while the interrupted run writes its evidence is ignored."""

from __future__ import annotations

import signal
from typing import Any


class Stop(BaseException):
    """Raised by the SIGTERM handler so that the run ends like a Ctrl-C."""


def ignore_sigint() -> Any:
    try:
        return signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        return None


def restore_sigint(handler: Any) -> None:
    if handler is not None:
        signal.signal(signal.SIGINT, handler)


class sigterm_as_interrupt:
    """While running, SIGTERM (CI cancelling a job) ends the run like Ctrl-C."""

    def __enter__(self) -> None:
        self.old = self.old_int = None
        try:
            self.old = signal.signal(signal.SIGTERM, self._handler)
            # A run started with SIGINT ignored (a shell's background job, nohup) would sit out
            # every timeout on Ctrl-C or `kill -INT`: the run handles it whatever it inherited.
            if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
                self.old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
        except ValueError:  # not the main thread
            self.old = None

    @staticmethod
    def _handler(signum: int, frame: Any) -> None:
        raise Stop()

    def __exit__(self, *exc: Any) -> None:
        if self.old is not None:
            signal.signal(signal.SIGTERM, self.old)
        if self.old_int is not None:
            signal.signal(signal.SIGINT, self.old_int)
