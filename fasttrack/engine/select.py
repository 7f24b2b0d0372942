"""Which plan instances one shard of a run executes, and the digest of each instance's inputs
(for --resume)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fasttrack.kinds.base import Kinds
    from fasttrack.plan.instance import CheckInstance


def group_key(instance: CheckInstance, kinds: Kinds) -> str:
    """Instances that share one expensive run (one pytest session per kernel suite and hardware
    setup: the kind's ``execution.group_dims``) share a key, so a shard never splits them."""
    kind = kinds.get(instance.kind)
    dims = kind.execution.group_dims if kind is not None else None
    if dims is None:
        return instance.id
    point = instance.scope_point
    hardware = "" if point is None else ",".join(f"{k}={point.get(k)}" for k in dims)
    return f"{instance.kind}/{instance.name}@{hardware}"


def shard_assignment(instances: Sequence[CheckInstance], count: int, kinds: Kinds) -> dict[str, int]:
    """instance id -> shard (1-based): groups are dealt, largest estimated cost first, to the
    least loaded shard. Deterministic: every shard computes the same assignment."""
    groups: dict[str, list[CheckInstance]] = {}
    for inst in instances:
        groups.setdefault(group_key(inst, kinds), []).append(inst)
    cost = {key: sum(max(float(i.est_seconds), 0.01) for i in members if i.runnable) for key, members in groups.items()}
    load = [0.0] * count
    assignment: dict[str, int] = {}
    for key in sorted(groups, key=lambda k: (-cost[k], k)):
        shard = min(range(count), key=lambda s: (load[s], s))
        load[shard] += cost[key]
        for inst in groups[key]:
            assignment[inst.id] = shard + 1
    return assignment


def inputs_digest(manifest_sha256: str, code_identity: str, instance: CheckInstance, tool_version: str) -> str:
    """What a completed outcome depends on: the manifest, the code, the instance's scope point
    and configuration. Equal digests: the outcome may be reused by --resume."""
    point = None if instance.scope_point is None else instance.scope_point.as_dict()
    payload = {
        "manifest": manifest_sha256,
        "code": code_identity,
        "id": instance.id,
        "kind": instance.kind,
        "scope_point": point,
        "config": instance.config,
        "timeout_s": instance.timeout_s,
        "tool": tool_version,
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
