"""Which plan instances this run executes (--only/--skip/--shard), and the digest of each
instance's inputs (for --resume)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from fasttrack.errors import UsageError
from fasttrack.runners import RUNNERS, canonical_kind

HARDWARE_KEYS = ("accelerator", "device_count", "tensor_parallel")


def parse_kinds(values: Iterable[str], option: str) -> tuple[str, ...]:
    """'scope,kernels' (repeatable, comma separated, aliases allowed) -> canonical kinds."""
    kinds: list[str] = []
    for value in values:
        for name in value.split(","):
            if not name.strip():
                continue
            kind = canonical_kind(name)
            if kind not in RUNNERS:
                raise UsageError(f"{option}: unknown check kind {name.strip()!r}; known: {', '.join(RUNNERS)} "
                                 "(aliases: scope = scope_diff, kernel, eval, feature, benchmark)")
            if kind not in kinds:
                kinds.append(kind)
    return tuple(kinds)


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        index, count = (int(p) for p in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard: expected K/N (e.g. 1/2), got {text!r}") from None
    if count < 1 or not 1 <= index <= count:
        raise UsageError(f"--shard: K/N needs 1 <= K <= N, got {text!r}")
    return index, count


@dataclass(frozen=True)
class Selection:
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    shard: tuple[int, int] | None = None

    def kind_selected(self, kind: str) -> bool:
        return (not self.only or kind in self.only) and kind not in self.skip

    def excluded_kinds(self, kinds: Iterable[str]) -> list[str]:
        return [k for k in dict.fromkeys(kinds) if not self.kind_selected(k)]

    def describe_exclusion(self) -> str:
        parts = []
        if self.only:
            parts.append("--only " + ",".join(self.only))
        if self.skip:
            parts.append("--skip " + ",".join(self.skip))
        return " ".join(parts)


def group_key(instance: Any) -> str:
    """Instances that share one expensive run (e.g. one pytest session per kernel suite and
    hardware setup) share a key, so a shard never splits them."""
    point = instance.scope_point
    hardware = "" if point is None else ",".join(f"{k}={point.get(k)}" for k in HARDWARE_KEYS if point.get(k) is not None)
    if instance.kind in ("kernels",):
        hardware = "" if point is None else ",".join(f"{k}={point.get(k)}" for k in ("accelerator", "device_count"))
        return f"{instance.kind}/{instance.name}@{hardware}"
    return instance.id


def shard_assignment(instances: Sequence[Any], count: int) -> dict[str, int]:
    """instance id -> shard (1-based): groups are dealt, largest estimated cost first, to the
    least loaded shard. Deterministic: every shard computes the same assignment."""
    groups: dict[str, list[Any]] = {}
    for inst in instances:
        groups.setdefault(group_key(inst), []).append(inst)
    cost = {key: sum(max(float(i.est_seconds), 0.01) for i in members if i.runnable) for key, members in groups.items()}
    load = [0.0] * count
    assignment: dict[str, int] = {}
    for key in sorted(groups, key=lambda k: (-cost[k], k)):
        shard = min(range(count), key=lambda s: (load[s], s))
        load[shard] += cost[key]
        for inst in groups[key]:
            assignment[inst.id] = shard + 1
    return assignment


def inputs_digest(manifest_sha256: str, code_identity: str, instance: Any, tool_version: str) -> str:
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
