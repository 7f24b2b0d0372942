"""The run's shared target servers (`fasttrack.targets.pool`): one server per side per scope point
for a target kind that shares them (``vllm``), started when a check first asks (the run's first
point in the background at once, while checks that need no server run), and stopped once the
point's last check that drives the target is done, unless a later point runs the very same
server (points that differ only in what the server is not told, e.g. the batch size). A benchmark
with server settings of its own (``setups.<side>.engine_args``) and an ablation arm ask for
servers of their own: those stop once the last check that asks for them is done."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from fasttrack.kinds.base import Kinds
from fasttrack.manifest import Manifest
from fasttrack.plan.instance import CheckInstance
from fasttrack.process.cpu import is_cpu_point
from fasttrack.targets.pool import Key, PoolService, ServerPool, spec_key
from fasttrack.targets.protocol import SIDES, TargetKind
from fasttrack.targets.registry import TARGET_KINDS


def shares_servers(manifest: Manifest, targets: Mapping[str, TargetKind] = TARGET_KINDS) -> bool:
    """Whether the manifest's target kind shares its servers across a point's checks."""
    kind = targets.get(manifest.target.kind)
    return kind is not None and kind.shared_server is not None


def point_id(instance: CheckInstance) -> str:
    return instance.scope_point.id if instance.scope_point is not None else ""


def own_settings(instance: CheckInstance) -> str:
    """What a check changes about the servers it asks for (an ablation arm's switches, a benchmark's
    own ``engine_args``): "" for the point's plain servers."""
    config = instance.config or {}
    return (
        repr((config.get("arm"), config.get("engine_args"))) if config.get("arm") or config.get("engine_args") else ""
    )


class RunServers:
    """The pool of one run, with the bookkeeping of which checks still need which servers: a group
    is a point's checks that ask for the same servers (its plain ones, or a benchmark's own)."""

    def __init__(
        self,
        manifest: Manifest,
        kinds: Kinds,
        selected: Sequence[CheckInstance],
        folder: Path,
        message: Callable[[str], None],
        targets: Mapping[str, TargetKind] = TARGET_KINDS,
    ):
        kind = targets[manifest.target.kind]
        assert kind.shared_server is not None
        self.spec_of = kind.shared_server
        self.manifest = manifest
        self.message = message
        self.driving = [
            i for i in selected if kinds[i.kind].execution.drives_target and not (i.config or {}).get("own_server")
        ]
        self.remaining = Counter(_group(i) for i in self.driving)
        self.points = {point_id(i): i.scope_point for i in self.driving}
        self.groups = {_group(i): (i.scope_point, manifest.for_config(i.config)) for i in self.driving}
        self._lock = threading.Lock()
        self.pool = ServerPool(folder)
        self.service = PoolService(self.pool)
        if self.driving:  # the first point's servers start now, beside the checks that need none
            first = self.driving[0].scope_point
            self.pool.prestart(self._specs(first))
            ahead = threading.Thread(target=self._start_next, args=(point_id(self.driving[0]),), daemon=True)
            ahead.start()

    def env(self) -> dict[str, str]:
        return self.service.env()

    def done(self, instance: CheckInstance) -> None:
        """One instance finished: stop the servers of its group when no later check needs them."""
        group = _group(instance)
        if group not in self.remaining:
            return
        with self._lock:
            self.remaining[group] -= 1
            if self.remaining[group] > 0:
                return
            del self.remaining[group]
            keep = {spec_key(s) for g in self.remaining for s in self._specs(*self.groups[g])}

        def kept(key: Key) -> bool:
            return key in keep

        for line in self.pool.release(kept):
            self.message(line)

    def close(self) -> None:
        self.service.close()

    def _start_next(self, first: str) -> None:
        """Once the first point's servers answer, start the next CPU point's (host memory: an
        accelerator's point waits for its turn), so that its servers' start overlaps the first
        point's checks instead of following them."""
        following = [p for p in self.points if p != first]
        point = self.points[following[0]] if following else None
        if point is None or not is_cpu_point(point):
            return
        try:
            self.pool.acquire(self._specs(self.points[first]))
        except Exception:  # the first point's checks report a server that did not start
            return
        self.pool.prestart(self._specs(point))

    def _specs(self, point: object, manifest: Manifest | None = None) -> list:
        """The servers a point's checks ask for (of ``manifest``: a group's own settings): each
        side's, and at a point with a draft length each side's drafting server too."""
        manifest = self.manifest if manifest is None else manifest
        values = point.as_dict() if point is not None and hasattr(point, "as_dict") else None
        draft = (values or {}).get("draft_length")
        try:
            specs = [self.spec_of(manifest, side, values, None) for side in SIDES]
            if draft:
                specs += [self.spec_of(manifest, side, values, int(draft)) for side in SIDES]
            return specs
        except Exception:  # a spec that cannot be made is the check's error to report, not the pool's
            return []


def _group(instance: CheckInstance) -> tuple[str, str]:
    return point_id(instance), own_settings(instance)
