"""``refused``: one instance per refused combination of each switch, at every deployment of its
``points`` (default: every deployment where the switch acts); a switch with rival arms has one per
arm, ``<id>~<arm>``, its candidate running that arm."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fasttrack.plan.servers import OWN_SERVER

if TYPE_CHECKING:
    from fasttrack.plan import CheckInstance, Planner

# A refusal comes from argument or config checks before the model loads: a start, not a run.
EST_S = 60.0


def plan(planner: Planner) -> Iterable[CheckInstance]:
    m = planner.m
    for switch in m.switches:
        for combination in switch.refused:
            config = {
                "switch": switch.name,
                "id": combination.id,
                "serve_args": list(combination.serve_args),
                "env": dict(combination.env),
                "message": combination.message,
                OWN_SERVER: True,  # never the run's shared servers (fasttrack.plan.servers.uses_shared_servers)
            }
            name = combination.id
            if switch.rival_of is not None:  # a rival arm's: its candidate runs that arm, <id>~<arm>
                config["arm"] = m.arm_switches(switch.name)
                name = f"{combination.id}~{switch.name}"
            points = planner.narrowed(combination.points) if combination.points else planner.setups
            for point in points:
                if combination.points or switch.acts_at(point):
                    yield planner.make("refused", name, point, True, EST_S, config, timeout=combination.timeout_s)
