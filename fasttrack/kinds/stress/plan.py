"""``stress`` audits: one per hardware setup (they test kernels; engine settings do not reach them)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fasttrack.manifest.sections import thaw

if TYPE_CHECKING:
    from fasttrack.plan import CheckInstance, Planner


def plan(planner: Planner) -> Iterable[CheckInstance]:
    for audit in planner.m.audits:
        if audit.kind != "stress":
            continue
        cost = 0.5 * audit.repeats * max(1, len(audit.delays_us))
        for point in planner.hardware:
            yield planner.make(
                "stress", audit.id, point, audit.required, cost, thaw(audit.raw), timeout=audit.timeout_s
            )
