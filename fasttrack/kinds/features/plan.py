"""``features``: each enabled preserved feature at each deployment, narrowed by its ``points``; a
probe of `fasttrack.probes.EVERY_DTYPE` (full context) also once per dtype the scope declares."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fasttrack.manifest.sections import thaw
from fasttrack.probes import EVERY_DTYPE

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
        points = planner.narrowed(probe.points)
        for point in planner.at_every_dtype(points) if probe.name in EVERY_DTYPE else points:
            yield planner.make(
                "features",
                probe.name,
                point,
                probe.required,
                cost + planner.startup(),
                config,
                timeout=probe.timeout_s,
            )
