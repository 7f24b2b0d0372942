"""The servers a run shares (a target kind with ``shared_server``, e.g. ``vllm``): one per side
per scope point, one more per side and draft length (speculative decoding: the candidate's, and
stock's at the same draft length, which its acceptance is judged against), one per side
whose settings a benchmark changes (its ``engine_args``), and with rival arms one candidate per
arm (an arm's candidate with a benchmark's own arguments too: one per arm and setting), each
with the checks that use it. What `fasttrack plan` prints and the plan's dict records; the
engine's pool (`fasttrack.engine.servers`) starts exactly these."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fasttrack.plan.instance import CheckInstance
from fasttrack.targets.pool import spec_key
from fasttrack.targets.protocol import SIDES, Side, TargetKind

# A check's config key saying it starts a server of its own (a refused combination, which the
# run's shared servers must never serve).
OWN_SERVER = "own_server"


def uses_shared_servers(instance: CheckInstance, drives: Container[str]) -> bool:
    """Whether a check asks the run's shared servers for its sides: its kind drives the target
    (``drives``: their names) and it starts no server of its own. The one predicate of the plan's
    servers (`shared_servers`) and the engine's pool (`fasttrack.engine.servers`)."""
    return instance.kind in drives and not (instance.config or {}).get(OWN_SERVER)


@dataclass
class SharedServer:
    side: str
    point: Mapping[str, Any]
    draft_length: int | None
    checks: list[str] = field(default_factory=list)
    engine_args: tuple[str, ...] = ()  # a benchmark's own server arguments for this side
    arm: str | None = None  # a rival arm's candidate (its own server); None: stock, or the one candidate

    def to_dict(self) -> dict[str, Any]:
        data = {
            "side": self.side,
            "point": dict(self.point),
            "draft_length": self.draft_length,
            "checks": self.checks,
            "engine_args": list(self.engine_args),
        }
        return {**data, "arm": self.arm} if self.arm is not None else data


def shared_servers(
    manifest: Any, instances: Iterable[CheckInstance], drives: set[str], kind: TargetKind | None
) -> tuple[SharedServer, ...]:
    """The servers of the runnable instances of kinds that drive the target, in first-use order."""
    if kind is None or kind.shared_server is None:
        return ()
    found: dict[Any, SharedServer] = {}
    for instance in instances:
        if not instance.runnable or not uses_shared_servers(instance, drives):
            continue
        values = dict(instance.scope_point.as_dict()) if instance.scope_point is not None else {}
        draft = values.pop("draft_length", None)
        own = manifest.for_config(instance.config)  # an ablation or rival arm, a benchmark's own engine_args
        sides = [side for side in SIDES if side in manifest.server_sides(instance.config)]
        wanted: list[tuple[Side, int | None]] = [(side, None) for side in sides]
        if draft:  # as the engine's pool starts them (`point_specs`): each side's drafting server
            wanted += [(side, int(draft)) for side in sides]
        for side, length in wanted:
            try:  # an arm's candidate is a server of its own; the stock server is shared
                key = spec_key(kind.shared_server(own, side, values, length))
            except Exception:  # the check reports a spec it cannot make
                continue
            arm = _arm_of(manifest, instance.config) if side == "candidate" else None
            server = found.setdefault(
                key, SharedServer(side, values, length, engine_args=own.side_args.get(side, ()), arm=arm)
            )
            server.checks.append(
                instance.name if instance.kind == instance.name else f"{instance.kind} {instance.name}"
            )
    return tuple(found.values())


def _arm_of(manifest: Any, config: Mapping[str, Any] | None) -> str | None:
    """The rival arm an instance's candidate runs, if any."""
    names = set((config or {}).get("arm") or ())
    return next((arm for arm in manifest.rival_arms if arm in names), None)
