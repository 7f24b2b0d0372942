"""``kernels``: accelerator and device_count plus the dimensions the suite ``covers``; a suite
covering ``batch`` has one more instance per accelerator and device_count, ``<suite>:between``:
the batch sizes between the declared points (every size of a range up to 256 wide, else a sample
seeded by the head commit; the other dimensions at their first values), run in the same pytest
session."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fasttrack.manifest.scope import ScopePoint
from fasttrack.manifest.sections import thaw

if TYPE_CHECKING:
    from fasttrack.plan import CheckInstance, Planner

# The kernel-test instance of a suite that checks the batch sizes between the declared points.
BETWEEN_SUFFIX = ":between"


def plan(planner: Planner) -> Iterable[CheckInstance]:
    m = planner.m
    for test in m.kernel_tests:
        dims = ("accelerator", "device_count", *test.covers)
        for point in _on_own_hardware(m.scope_points(dims), test.device_count, planner):
            cost = 2.0 if planner.is_cpu(point) else 1.0
            yield planner.make("kernels", test.id, point, test.required, cost, thaw(test.raw), timeout=test.timeout_s)
        if "batch" in test.covers and m.scope.batch is not None:
            # the batch sizes between the declared points, run in the same pytest session
            for point in _on_own_hardware(m.scope_points(("accelerator", "device_count")), test.device_count, planner):
                yield planner.make(
                    "kernels",
                    f"{test.id}{BETWEEN_SUFFIX}",
                    point,
                    test.required,
                    5.0,
                    {**thaw(test.raw), "between_points": True},
                    timeout=test.timeout_s,
                )


def _on_own_hardware(points: Iterable[ScopePoint], device_count: int | None, planner: Planner) -> list[ScopePoint]:
    """The suite's points on its own, smaller hardware (``device_count`` devices of each
    accelerator instead of each declared count), once each; the scope's points without one."""
    if device_count is None:
        return list(points)
    own: dict[str, ScopePoint] = {}
    for point in points:
        moved = ScopePoint.of({**point.as_dict(), "device_count": device_count}) if not planner.is_cpu(point) else point
        own.setdefault(moved.id, moved)
    return list(own.values())
