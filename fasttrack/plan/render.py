"""The plan as text (`fasttrack plan`): grouped by check kind, hardware setups named, other scope
dimensions counted, with the rough cost and whether each group can run here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.manifest import HARDWARE_DIMENSIONS, ScopePoint
from fasttrack.manifest.acceptance import describe, in_target
from fasttrack.plan.instance import CheckInstance
from fasttrack.plan.planner import Plan


def format_seconds(seconds: float) -> str:
    if seconds < 90:
        return f"~{seconds:.0f}s"
    if seconds < 5400:
        return f"~{seconds / 60:.0f}m"
    return f"~{seconds / 3600:.1f}h"


def hardware_label(point: ScopePoint | None) -> str:
    """Short name of a point's hardware setup: 'cpu tp2', 'NVIDIA GB300 x16 tp8'."""
    if point is None or point.get("accelerator") is None:
        return "global"
    accelerator = point.get("accelerator")
    tp = point.get("tensor_parallel")
    text = accelerator if str(accelerator).lower() == "cpu" else f"{accelerator} x{point.get('device_count', 1)}"
    return text + (f" tp{tp}" if tp is not None else "")


def render_plan_table(plan: Plan, group: bool = True) -> str:
    """The plan as text, grouped by check kind. With ``group`` one row per (check, outcome):
    hardware setups are named, other scope dimensions counted (``group=False``: every instance)."""
    env = plan.environment
    lines = [
        f"manifest: {plan.manifest.path} ({plan.manifest.id}, sha256 {plan.manifest.sha256[:12]})",
        f"this machine: {env.describe()}; {env.os}; Python {env.python}",
    ]
    engine = plan.manifest.scope.engine_values()
    fixed = {name: values[0] for name, values in engine.items() if len(values) == 1}
    if engine:
        lines.append("engine: " + "; ".join(f"{k} {', '.join(map(str, v))}" for k, v in engine.items()))
    lines.append("")
    for kind, instances in plan.by_kind().items():
        runnable = sum(1 for i in instances if i.runnable)
        lines.append(f"{kind}: {runnable} of {len(instances)} runnable here")
        rows = (
            _grouped_rows(instances, fixed)
            if group
            else [(i.id, _status(i), format_seconds(i.est_seconds)) for i in instances]
        )
        width = min(max(len(r[0]) for r in rows), 70)
        for label, status, cost in rows:
            lines.append(f"  {label.ljust(width)}  {cost:>6}  {status}")
        lines.append("")
    lines += _server_lines(plan)
    forced = in_target(plan.manifest.data)
    if forced:
        lines.append(
            "synthetic speculative acceptance is set by the target (benchmarks and claims measured with it are "
            f"labelled synthetic): {describe(forced)}"
        )
    total = sum(i.est_seconds for i in plan.runnable())
    lines.append(f"{plan.summary()}")
    lines.append(f"estimated time of the runnable instances: {format_seconds(total)} (rough)")
    return "\n".join(lines)


def _server_lines(plan: Plan) -> list[str]:
    """One line per shared server: the point, the side, the checks that use it."""
    if not plan.servers:
        return []
    lines = [
        f"servers: {len(plan.servers)} ({plan.manifest.target.kind}), one per side per scope point, shared by the "
        "checks there; both sides start at once"
    ]
    engine = set(plan.manifest.scope.deployment_dimensions()) - set(HARDWARE_DIMENSIONS)
    for server in plan.servers:
        point = ScopePoint.of(dict(server.point))
        where = hardware_label(point) + (f" draft {server.draft_length}" if server.draft_length else "")
        # the deployment's other values (a checkpoint, a data-parallel degree): each its own servers
        where += "".join(f" {k}={v}" for k, v in sorted(server.point.items()) if k in engine)
        where += f" with {' '.join(server.engine_args)}" if server.engine_args else ""
        checks = ", ".join(dict.fromkeys(server.checks))
        side = f"{server.side} (arm {server.arm})" if server.arm else server.side
        lines.append(f"  [{where}] {side}: {len(server.checks)} check(s): {checks}")
    return [*lines, ""]


def _status(inst: CheckInstance) -> str:
    if inst.runnable:
        return "runnable" + ("" if inst.required else " (optional)")
    return f"NOT RUNNABLE [{inst.reason_code}] {inst.reason}"


def _grouped_rows(
    instances: tuple[CheckInstance, ...], fixed: Mapping[str, Any] | None = None
) -> list[tuple[str, str, str]]:
    """``fixed``: dimensions with one value in the whole scope (an engine setting): named once in the
    table's header line, not counted in every row."""
    fixed = fixed or {}
    groups: dict[tuple, list[CheckInstance]] = {}
    for inst in instances:
        groups.setdefault((inst.name, inst.runnable, inst.reason), []).append(inst)
    rows = []
    for (name, _, _), members in groups.items():
        setups = list(dict.fromkeys(hardware_label(m.scope_point) for m in members))
        label = name if setups == ["global"] else f"{name} [{', '.join(setups)}]"
        names = {d for m in members if m.scope_point for d in m.scope_point.names()}
        extra = sorted(names - set(HARDWARE_DIMENSIONS) - set(fixed))
        if extra:
            label += f" x {len(members)} point{'s' if len(members) > 1 else ''} over {', '.join(extra)}"
        rows.append((label, _status(members[0]), format_seconds(sum(m.est_seconds for m in members))))
    return rows
