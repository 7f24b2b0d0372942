"""The servers a run shares (a target kind with ``shared_server``, e.g. ``vllm``): one per side
per scope point, one more per draft length for the candidate's speculative server, and one per
side whose settings a benchmark changes (its ``engine_args``), each with
the checks that use it. What `fasttrack plan` prints and the plan's dict records; the engine's pool
(`fasttrack.engine.servers`) starts exactly these."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fasttrack.plan.instance import CheckInstance
from fasttrack.targets.pool import spec_key
from fasttrack.targets.protocol import SIDES, Side, TargetKind


@dataclass
class SharedServer:
    side: str
    point: Mapping[str, Any]
    draft_length: int | None
    checks: list[str] = field(default_factory=list)
    engine_args: tuple[str, ...] = ()  # a benchmark's own server arguments for this side

    def to_dict(self) -> dict[str, Any]:
        return {
            "side": self.side,
            "point": dict(self.point),
            "draft_length": self.draft_length,
            "checks": self.checks,
            "engine_args": list(self.engine_args),
        }


def shared_servers(
    manifest: Any, instances: Iterable[CheckInstance], drives: set[str], kind: TargetKind | None
) -> tuple[SharedServer, ...]:
    """The servers of the runnable instances of kinds that drive the target, in first-use order."""
    if kind is None or kind.shared_server is None:
        return ()
    found: dict[Any, SharedServer] = {}
    for instance in instances:
        if not instance.runnable or instance.kind not in drives or (instance.config or {}).get("own_server"):
            continue  # (a check that starts a server of its own: a refused combination)
        values = dict(instance.scope_point.as_dict()) if instance.scope_point is not None else {}
        draft = values.pop("draft_length", None)
        own = manifest.for_config(instance.config)  # an ablation arm, a benchmark's own engine_args
        wanted: list[tuple[Side, int | None]] = [(side, None) for side in SIDES]
        if draft:
            wanted.append(("candidate", int(draft)))
        for side, length in wanted:
            try:
                key = spec_key(kind.shared_server(own, side, values, length))
            except Exception:  # the check reports a spec it cannot make
                continue
            server = found.setdefault(key, SharedServer(side, values, length, engine_args=own.side_args.get(side, ())))
            server.checks.append(
                instance.name if instance.kind == instance.name else f"{instance.kind} {instance.name}"
            )
    return tuple(found.values())
