"""Progress of a gate run: a live status line on a terminal (current check, done/total,
elapsed, ETA), plain lines in CI logs and pipes.

The ETA is the plan's estimates calibrated by what this run has measured: per check kind, the
wall time the finished instances took against their estimates (a kind not seen yet uses the
ratio of every kind seen so far). Instances that share one expensive run (one pytest session per
kernel suite and hardware setup: ``select.group_key``) count as one unit: the first to finish
spent the whole session, the rest are free. Checks that share the machine under ``--jobs N``
(``jobs.shares_cores``) divide their remaining cost by N.

The live line fits the terminal (at most 80 columns): the counts and the times come first and are
never cut; the check's name is shortened to what is left.

Seeded (``check --costs-from EVIDENCE``, `fasttrack.plan.costs.MeasuredCosts`): the estimates
are an earlier run's measured seconds and its overlap (wall / the instances' seconds), so the ETA
is shown from the first second and a kind not measured yet keeps its measured cost.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from fasttrack.plan.instance import CheckInstance

MAX_COLUMNS = 80


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


def _est(instance: Any) -> float:
    return max(float(getattr(instance, "est_seconds", 0.0) or 0.0), 0.0)


class Estimator:
    """Remaining wall time of a run, from the plan's estimates calibrated per kind by measurement."""

    def __init__(
        self,
        instances: Sequence[Any],
        group_of: Callable[[Any], str] = lambda i: str(i.id),
        parallel_of: Callable[[Any], int] = lambda i: 1,
        seed_factor: float | None = None,
    ):
        self.group_of = group_of
        # seeded: estimates are measured seconds, overlapped by this factor (module docstring)
        self.seed_factor = seed_factor
        self.parallel_of = parallel_of if seed_factor is None else (lambda i: 1)
        self.units: dict[str, list[Any]] = defaultdict(list)
        for inst in instances:
            self.units[group_of(inst)].append(inst)
        self.done_units: set[str] = set()
        self.spent: dict[str, float] = defaultdict(float)  # kind -> wall seconds measured
        self.estimated: dict[str, float] = defaultdict(float)  # kind -> estimates of what was measured
        self.started: dict[str, float] = {}  # unit -> monotonic start of its first instance

    def start(self, instance: Any, now: float) -> None:
        self.started.setdefault(self.group_of(instance), now)

    def done(self, instance: Any, wall_s: float) -> None:
        unit = self.group_of(instance)
        if unit in self.done_units:
            return  # the unit's cost was counted when its first instance finished
        self.done_units.add(unit)
        members = self.units.get(unit, [instance])
        self.spent[instance.kind] += max(wall_s, 0.0)
        self.estimated[instance.kind] += sum(_est(m) for m in members)

    def ratio(self, kind: str) -> float:
        """Measured ÷ estimated for this kind; for a kind not measured yet, over every kind so far."""
        if self.estimated.get(kind, 0.0) > 0:
            return self.spent[kind] / self.estimated[kind]
        if self.seed_factor is not None:
            return self.seed_factor
        total_est = sum(self.estimated.values())
        return sum(self.spent.values()) / total_est if total_est > 0 else 1.0

    def remaining(self, now: float) -> float | None:
        """Seconds left, or None before anything was measured (a guess would be the plan's alone)
        unless the estimates were seeded from a measured run."""
        if not self.done_units and self.seed_factor is None:
            return None
        left = 0.0
        for unit, members in self.units.items():
            if unit in self.done_units:
                continue
            first = members[0]
            cost = sum(_est(m) for m in members) * self.ratio(first.kind)
            if unit in self.started:
                cost = max(cost - (now - self.started[unit]), 0.0)
            left += cost / max(1, self.parallel_of(first))
        return left


class Progress:
    """``start(instance)`` before a check, ``done(instance, outcomes)`` after it."""

    def __init__(
        self,
        total: int,
        est_total_s: float,
        stream: TextIO | None = None,
        live: bool | None = None,
        quiet: bool = False,
        estimator: Estimator | None = None,
    ):
        self.stream = stream or sys.stderr
        self.live = is_live_terminal(self.stream) if live is None else live
        self.quiet = quiet
        self.total = total
        self.est_total_s = max(est_total_s, 0.0)
        self.estimator = estimator
        self.est_done_s = 0.0
        self.done_count = 0
        self.started = time.monotonic()
        self.current: Any = None
        self.running: list[Any] = []  # more than one with --jobs > 1
        self._start_of: dict[int, float] = {}

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def eta(self) -> float | None:
        """Remaining time: the calibrated estimator when there is one; else the plan's estimate of
        what is left, scaled by how far off the estimates have been so far."""
        if self.estimator is not None:
            return self.estimator.remaining(time.monotonic())
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
        now = time.monotonic()
        self._start_of[id(instance)] = now
        if self.estimator is not None:
            self.estimator.start(instance, now)
        self.current = instance
        self.running.append(instance)
        if self.live and not self.quiet:
            self._status_line(instance)

    def done(self, instance: CheckInstance, outcomes: list[Any], reused: bool = False) -> None:
        self.done_count += 1
        self.est_done_s += _est(instance)
        wall = time.monotonic() - self._start_of.pop(id(instance), time.monotonic())
        if self.estimator is not None:
            self.estimator.done(instance, wall)
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

    def status_text(self, instance: CheckInstance, width: int) -> str:
        """The live line, at most ``width`` characters: counts and times first and whole, the
        check's name and point shortened to what is left."""
        eta = self.eta()
        beside = f" +{len(self.running) - 1}" if len(self.running) > 1 else ""
        head = f"[{self.done_count + 1}/{self.total}{beside}] "
        tail = f"  {format_duration(self.elapsed())} ETA {format_duration(eta) if eta is not None else '?'}"
        point = instance.scope_point.id if instance.scope_point is not None else ""
        what = f"{instance.kind}/{instance.name}" + (f" @ {point}" if point else "")
        room = width - len(head) - len(tail)
        if len(what) > room:
            what = what[: room - 1] + "…" if room > 1 else ""
        return (head + what)[: max(width - len(tail), 0)] + tail

    def _status_line(self, instance: CheckInstance) -> None:
        width = min(shutil.get_terminal_size((MAX_COLUMNS, 20)).columns, MAX_COLUMNS) - 1
        self.stream.write("\r\x1b[2K" + self.status_text(instance, width))
        self.stream.flush()

    def _clear(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
