"""One instance per hardware setup of the scope."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fasttrack.plan import CheckInstance, Planner


def plan(planner: Planner) -> Iterable[CheckInstance]:
    for point in planner.hardware:
        yield planner.make("parrot", "setup", point, True, 0.5, {"say": point.id})
