"""``divergence``: one instance per deployment, narrowed by its ``points``, and per dtype the
scope declares (`Planner.at_every_dtype`: a bug of one format is invisible in another)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fasttrack.manifest.sections import thaw

if TYPE_CHECKING:
    from fasttrack.plan import CheckInstance, Planner


def plan(planner: Planner) -> Iterable[CheckInstance]:
    d = planner.m.divergence
    if d is None:
        return
    cost = max(1, len(d.buckets) - 1) * (d.max_prompts or 8) * 2.0
    for point in planner.at_every_dtype(planner.narrowed(d.points)):
        yield planner.make(
            "divergence", "token_kl", point, d.required, cost + planner.startup(), thaw(d.raw), timeout=d.timeout_s
        )
