"""The outcomes must cover exactly the plan: re-plan the manifest (the copy in the evidence, or
the one given) for the run's recorded selection, without this machine's hardware, and compare.

Every planned instance has one outcome of its kind, name and scope point. An instance the
selection left out (``--only``/``--skip``/``--hardware``) is ``not_run(out_of_scope)`` and not
required; every other keeps the manifest's ``required`` (the claims lint sets its own, and its
rule checks it). An outcome the plan does not have may exist only if it is not required (a
benchmark's per-point claim outcomes). Shards: another shard's instances stay required, so a
shard alone never passes and needs no assignment here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fasttrack.environment import Environment
from fasttrack.selection import Selection

if TYPE_CHECKING:
    from fasttrack.kinds.base import Kinds
    from fasttrack.manifest import Manifest
    from fasttrack.plan import CheckInstance, Plan


def bare_environment() -> Environment:
    """No accelerator probed: the plan's instance ids do not depend on the machine."""
    return Environment("cpu", (), "not probed", "none", "", 1, "", "")


def plan_problems(evidence: Mapping[str, Any], manifest: Manifest, kinds: Kinds, plan: Plan | None = None) -> list[str]:
    """What differs between the outcomes and the plan of ``manifest`` (``plan``: that plan, built
    already; its instances' ids, kinds, names, points and ``required`` do not depend on the machine)."""
    from fasttrack.plan import build_plan

    if plan is None:
        plan = build_plan(manifest, bare_environment(), kinds)
    own_required = {name for name, kind in kinds.items() if kind.sets_own_required}
    selection = Selection.of_run(evidence.get("run") or {})
    by_id: dict[str, list[Mapping[str, Any]]] = {}
    for outcome in evidence.get("checks") or ():
        by_id.setdefault(str(outcome.get("id")), []).append(outcome)
    problems: list[str] = []
    planned = set()
    for instance in plan.instances:
        planned.add(instance.id)
        found = by_id.get(instance.id, [])
        if not found:  # an instance that reports per part of itself (a vllm_bench concurrency: "#concurrency=8")
            parts = [o for ident, os in by_id.items() if ident.startswith(instance.id + "#") for o in os]
            found = [o for o in parts if o.get("kind") == instance.kind and o.get("name") == instance.name]
            for part in found:
                problems.extend(
                    f"{part.get('id')}: {p}" for p in _instance_problems(instance, part, selection, own_required)
                )
            if not found:
                problems.append(f"{instance.id}: planned, but the evidence has no outcome for it")
            continue
        if len(found) > 1:
            problems.append(f"{instance.id}: {len(found)} outcomes for one planned instance")
        problems.extend(f"{instance.id}: {p}" for p in _instance_problems(instance, found[0], selection, own_required))
    for ident, outcomes in by_id.items():
        if ident.split("#", 1)[0] in planned:
            continue
        for outcome in outcomes:
            if outcome.get("required", True):
                problems.append(f"{ident}: a required outcome the manifest's plan does not have")
    return problems


def _instance_problems(
    instance: CheckInstance, outcome: Mapping[str, Any], selection: Selection, own_required: set[str]
) -> list[str]:
    point_id = instance.scope_point.id if instance.scope_point is not None else None
    recorded = (outcome.get("kind"), outcome.get("name"), outcome.get("scope_point_id"))
    if recorded != (instance.kind, instance.name, point_id):
        return [f"recorded as kind/name/point {recorded}, planned as {(instance.kind, instance.name, point_id)}"]
    required = bool(outcome.get("required", True))
    left_out = not selection.kind_selected(instance.kind) or not selection.hardware_selected(instance.scope_point)
    if left_out:
        if outcome.get("status") != "not_run" or outcome.get("reason_code") != "out_of_scope" or required:
            return [
                "the run's selection left it out, but it is recorded as "
                f"{outcome.get('status')}({outcome.get('reason_code')}), required={required}"
            ]
        return []
    if instance.kind in own_required:  # its runner decides required (and its rule checks it)
        return []
    if required != bool(instance.required):
        return [
            f"the manifest makes it {'required' if instance.required else 'optional'}, "
            f"but it is recorded as {'required' if required else 'not required'}"
        ]
    return []
