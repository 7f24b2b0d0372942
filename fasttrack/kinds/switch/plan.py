"""``switch`` (proof of path): one instance per deployment (hardware setup × the scope's engine
dimensions): each deployment is a different code path. One instance judges every switch."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fasttrack.manifest.sections import thaw

if TYPE_CHECKING:
    from fasttrack.plan import CheckInstance, Planner


def plan(planner: Planner) -> Iterable[CheckInstance]:
    m = planner.m
    name = m.switch_check_name  # rival arms: once per arm (fasttrack.plan.arms)
    config = {"switches": [thaw(s) for s in (m.section("switches") or [m.section("switch")])]}
    for point in planner.setups:
        yield planner.make("switch", name, point, True, 30.0 + planner.startup(), config)
