"""``stock_unchanged``: one instance per deployment, narrowed by its ``points``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fasttrack.manifest.sections import thaw

if TYPE_CHECKING:
    from fasttrack.plan import CheckInstance, Planner


def plan(planner: Planner) -> Iterable[CheckInstance]:
    check = planner.m.stock_unchanged
    if check is None:
        return
    for point in planner.narrowed(check.points):
        yield planner.make(
            "stock_unchanged",
            "greedy",
            point,
            check.required,
            20.0 + 2 * planner.startup(),
            thaw(check.raw),
            timeout=check.timeout_s,
        )
