"""``speculative``: each deployment × each draft length, inside the speculative ``points``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fasttrack.manifest.narrowing import within

if TYPE_CHECKING:
    from fasttrack.plan import CheckInstance, Planner


def plan(planner: Planner) -> Iterable[CheckInstance]:
    m = planner.m
    spec = m.scope.speculative
    if spec is None:
        return
    config = m.section("scope")["speculative"]
    for point in m.scope_points((*m.scope.deployment_dimensions(), "draft_length")):
        if within(point, spec.points):
            yield planner.make("speculative", spec.method, point, True, 20.0 + planner.startup(), config)
