"""Starting a `fasttrack check` that a test will interrupt with SIGINT.

A process started from a shell in the background (`cmd &`, nohup, many CI runners) ignores SIGINT,
and an ignored signal stays ignored across exec: the gate under test would then never see the
test's Ctrl-C (it showed as "no exit within 60 s" / "exit 0 instead of 130" only when the suite
itself ran in the background). A terminal's Ctrl-C reaches a foreground process with SIGINT at its
default, so the child gets that default back before it starts."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """``preexec_fn``: SIGINT at its default disposition in the child (Python then installs its
    KeyboardInterrupt handler at startup)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
