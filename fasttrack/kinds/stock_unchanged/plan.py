"""``stock_unchanged``: one instance per deployment, narrowed by its ``points``; and per switch
that promises ``exact: true``, ``exact~<switch>`` (that switch alone on against stock) at every
deployment where the switch has an effect, once per declared dtype."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from fasttrack.evidence import ARM_SEPARATOR
from fasttrack.kinds.stock_unchanged.exact import EXACT
from fasttrack.manifest.sections import thaw

if TYPE_CHECKING:
    from fasttrack.plan import CheckInstance, Planner


def plan(planner: Planner) -> Iterable[CheckInstance]:
    check = planner.m.stock_unchanged
    yield from _exact(planner, thaw(check.raw) if check is not None else {})
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


def _exact(planner: Planner, settings: dict[str, Any]) -> Iterable[CheckInstance]:
    """The exactness promises: the stock_unchanged section's prompts and batches (or its defaults)."""
    requests = {k: v for k, v in settings.items() if k in ("prompts", "max_tokens", "batches", "top_logprobs")}
    for switch in planner.m.switches:
        if not switch.exact:
            continue
        config = {**requests, "exact": True, "arm": [switch.name]}
        for point in planner.at_every_dtype(planner.narrowed(switch.points)):
            yield planner.make(
                "stock_unchanged",
                f"{EXACT}{ARM_SEPARATOR}{switch.name}",
                point,
                True,
                10.0 + 2 * planner.startup(),
                config,
            )
