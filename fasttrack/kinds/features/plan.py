"""``features``: each enabled preserved feature at each deployment, narrowed by its ``points``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fasttrack.manifest.sections import thaw

if TYPE_CHECKING:
    from fasttrack.plan import CheckInstance, Planner


def plan(planner: Planner) -> Iterable[CheckInstance]:
    for probe in planner.m.features:
        if not probe.enabled:
            continue
        s = probe.settings
        cost = 20.0
        if probe.name == "temperature_sampling":
            cost = 0.05 * 2 * s.get("samples", 400) * len(s.get("temperatures", (1.0,))) * len(s.get("top_p", (1.0,)))
        config = {"name": probe.name, **thaw(s)}
        for point in planner.narrowed(probe.points):
            yield planner.make(
                "features",
                probe.name,
                point,
                probe.required,
                cost + planner.startup(),
                config,
                timeout=probe.timeout_s,
            )
