"""``evals``: each eval at each deployment (hardware setup × engine dimensions), narrowed by its
``points`` (declared, so reviewable); ablation arms (``<id>~<switch>``: the candidate turns on
only that switch) for the evals the ablation lists, at the ablation's and the switch's points."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from fasttrack.evidence import ARM_SEPARATOR
from fasttrack.manifest.sections import thaw

if TYPE_CHECKING:
    from fasttrack.plan import CheckInstance, Planner


def plan(planner: Planner) -> Iterable[CheckInstance]:
    for ev in planner.m.evals:
        yield from _eval(planner, ev)
    ablation = planner.m.ablation
    if ablation is None:
        return
    evals = {e.id: e for e in planner.m.evals}
    for arm, on, _switch in ablation.arms([s.name for s in planner.m.switches]):
        for ident in ablation.evals:
            ev = evals[ident]
            yield from _eval(planner, ev, arm=arm, required=ablation.required and ev.required, on=on)


def _eval(
    planner: Planner, ev: Any, arm: str | None = None, required: bool | None = None, on: tuple[str, ...] = ()
) -> Iterable[CheckInstance]:
    items = ev.limit or 200
    tokens = ev.generation.get("max_tokens", 256)
    name, config = ev.id, thaw(ev.raw)
    if arm is not None:
        name, config = f"{ev.id}{ARM_SEPARATOR}{arm}", {**config, "arm": list(on)}
    for point in planner.narrowed(ev.points):
        if arm is not None and not planner.arm_here(arm, point):
            continue
        cost = 2 * ev.repeats * items * tokens / planner.rate(point) + planner.startup()
        required_here = ev.required if required is None else required
        yield planner.make("evals", name, point, required_here, cost, config, timeout=ev.timeout_s)
