"""Progress of a gate run: a live status line on a terminal (current check, scope point,
done/total, elapsed, ETA), plain lines in CI logs and pipes."""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from fasttrack.instance import CheckInstance


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def is_live_terminal(stream: TextIO) -> bool:
    return (
        bool(getattr(stream, "isatty", lambda: False)())
        and not os.environ.get("CI")
        and os.environ.get("TERM") != "dumb"
    )


class Progress:
    """``start(instance)`` before a check, ``done(instance, outcomes)`` after it."""

    def __init__(
        self,
        total: int,
        est_total_s: float,
        stream: TextIO | None = None,
        live: bool | None = None,
        quiet: bool = False,
    ):
        self.stream = stream or sys.stderr
        self.live = is_live_terminal(self.stream) if live is None else live
        self.quiet = quiet
        self.total = total
        self.est_total_s = max(est_total_s, 0.0)
        self.est_done_s = 0.0
        self.done_count = 0
        self.started = time.monotonic()
        self.current: Any = None
        self.running: list[Any] = []  # more than one with --jobs > 1

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def eta(self) -> float | None:
        """Remaining time: the plan's estimate of what is left, scaled by how far off the
        estimates have been so far."""
        if self.done_count == 0 or self.est_done_s <= 0:
            return None
        remaining = max(self.est_total_s - self.est_done_s, 0.0)
        return remaining * (self.elapsed() / self.est_done_s)

    def message(self, text: str) -> None:
        if self.quiet:
            return
        self._clear()
        print(text, file=self.stream, flush=True)

    def start(self, instance: CheckInstance) -> None:
        self.current = instance
        self.running.append(instance)
        if self.live and not self.quiet:
            self._status_line(instance)

    def done(self, instance: CheckInstance, outcomes: list[Any], reused: bool = False) -> None:
        self.done_count += 1
        self.est_done_s += float(getattr(instance, "est_seconds", 0.0) or 0.0)
        self.running = [r for r in self.running if r is not instance]
        self.current = self.running[0] if self.running else None
        if self.quiet:
            return
        statuses = sorted({o.status.value for o in outcomes})
        tag = "reused " if reused else ""
        duration = sum(float(o.duration_s or 0) for o in outcomes if o.id == instance.id) or 0.0
        line = f"[{self.done_count}/{self.total}] {tag}{'/'.join(statuses) or 'no outcome'}  {instance.id}  ({duration:.1f}s)"
        bad = [o for o in outcomes if o.status.value != "passed" and o.reason]
        if bad:
            line += f"\n    {bad[0].status.value}: {bad[0].reason}"
        self.message(line)
        if self.live and self.current is not None:  # the checks still running beside it
            self._status_line(self.current)

    def finish(self) -> None:
        self._clear()

    def _status_line(self, instance: CheckInstance) -> None:
        point = instance.scope_point.id if instance.scope_point is not None else "global"
        eta = self.eta()
        beside = f" (+{len(self.running) - 1} running)" if len(self.running) > 1 else ""
        text = (
            f"[{self.done_count + 1}/{self.total}] {instance.kind}/{instance.name} @ {point}{beside}  "
            f"elapsed {format_duration(self.elapsed())}  ETA {format_duration(eta) if eta is not None else '?'}"
        )
        width = shutil.get_terminal_size((100, 20)).columns - 1
        self.stream.write("\r\x1b[2K" + text[:width])
        self.stream.flush()

    def _clear(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
