"""Rival arms (``enable.arms`` of an option switch): mutually exclusive candidates judged against
one stock baseline. Every instance of a kind that compares the candidate with stock is planned
once per arm, as an ablation arm is: named ``<check>~<arm>`` with ``config["arm"]`` listing the
switches that arm's candidate turns on (the arm and every switch that is no arm), so the engine
opens the candidate of that arm (`Manifest.for_arm`), the server pool starts one candidate server
per arm and keeps the one stock server they share, and every arm's outcomes count towards the
verdict (each arm must pass). A kind that runs stock only (``stock_unchanged``) is planned once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from fasttrack.evidence import ARM_SEPARATOR
from fasttrack.manifest import Manifest
from fasttrack.plan.instance import CheckInstance


def per_arm(
    manifest: Manifest, instances: Iterable[CheckInstance], per_kind: Mapping[str, bool]
) -> list[CheckInstance]:
    """``instances`` with every one of a kind ``per_kind`` marks replaced by one per rival arm."""
    arms = manifest.rival_arms
    if not arms:
        return list(instances)
    planned: list[CheckInstance] = []
    for instance in instances:
        if not per_kind.get(instance.kind) or "arm" in (instance.config or {}):
            planned.append(instance)
            continue
        planned += [_arm(manifest, instance, arm) for arm in arms]
    return planned


def _arm(manifest: Manifest, instance: CheckInstance, arm: str) -> CheckInstance:
    name = f"{instance.name}{ARM_SEPARATOR}{arm}"
    where = f"@{instance.scope_point.id}" if instance.scope_point is not None else ""
    config: dict[str, Any] = {**(instance.config or {}), "arm": manifest.arm_switches(arm)}
    if "claims" in config:  # a claim is about the arm its candidate setup names
        default = ((config.get("setups") or {}).get("candidate") or {}).get("arm")
        config["claims"] = [c for c in config["claims"] if _claim_arm(c, default) == arm]
    return replace(instance, id=f"{instance.kind}/{name}{where}", name=name, config=config)


def _claim_arm(claim: Mapping[str, Any], default: Any) -> Any:
    return ((claim.get("candidate") or {}).get("setup") or {}).get("arm", default)
