"""The run's shared target servers (`fasttrack.targets.pool`): one server per side per scope point
for a target kind that shares them (``vllm``), started when a check first asks (the run's first
point in the background at once, while checks that need no server run), and stopped once the
point's last check that drives the target is done, unless a later point runs the very same
server (points that differ only in what the server is not told, e.g. the batch size)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

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


class RunServers:
    """The pool of one run, with the bookkeeping of which points still need their servers."""

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
        self.driving = [i for i in selected if kinds[i.kind].execution.drives_target]
        self.remaining = Counter(point_id(i) for i in self.driving)
        self.points = {point_id(i): i.scope_point for i in self.driving}
        self.arms = point_manifests(manifest, self.driving)
        self._lock = threading.Lock()
        self.pool = ServerPool(folder)
        self.service = PoolService(self.pool)
        if self.driving:  # the first point's servers start now, beside the checks that need none
            self.pool.prestart(self._specs(point_id(self.driving[0])))
            ahead = threading.Thread(target=self._start_next, args=(point_id(self.driving[0]),), daemon=True)
            ahead.start()

    def env(self) -> dict[str, str]:
        return self.service.env()

    def done(self, instance: CheckInstance) -> None:
        """One instance finished: stop its point's servers when no later check needs them."""
        pid = point_id(instance)
        if pid not in self.remaining:
            return
        with self._lock:
            self.remaining[pid] -= 1
            if self.remaining[pid] > 0:
                return
            del self.remaining[pid]
            keep = {spec_key(s) for p in self.remaining for s in self._specs(p)}

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
            self.pool.acquire(self._specs(first))
        except Exception:  # the first point's checks report a server that did not start
            return
        self.pool.prestart(self._specs(following[0]))

    def _specs(self, pid: str) -> list:
        """The servers a point's checks ask for (`point_specs`)."""
        point = self.points.get(pid)
        values = point.as_dict() if point is not None and hasattr(point, "as_dict") else None
        return point_specs(self.spec_of, self.arms.get(pid, {"": (self.manifest, SIDES)}).values(), values)


Sides = tuple[str, ...]


def point_manifests(
    manifest: Manifest, driving: Sequence[CheckInstance]
) -> dict[str, dict[str, tuple[Manifest, Sides]]]:
    """Per point, the manifests its checks open their sides with and the sides they ask for: each
    ablation or rival arm's candidate is a server of its own, the stock server one for all."""
    found: dict[str, dict[str, tuple[Manifest, Sides]]] = {}
    for i in driving:
        arm, sides = manifest.for_config(i.config), manifest.server_sides(i.config)
        found.setdefault(point_id(i), {}).setdefault(repr((arm.candidate_switches, sides)), (arm, sides))
    return found


def point_specs(spec_of: Any, manifests: Iterable[tuple[Manifest, Sides]], values: dict | None) -> list:
    """The servers of one point: each side's (one candidate per arm its checks run, the stock
    server once), and at a point with a draft length each side's drafting server too."""
    draft = (values or {}).get("draft_length")
    specs: dict = {}
    for manifest, names in manifests:
        sides = [side for side in SIDES if side in names]
        try:
            wanted = [spec_of(manifest, side, values, None) for side in sides]
            if draft:
                wanted += [spec_of(manifest, side, values, int(draft)) for side in sides]
        except Exception:  # a spec that cannot be made is the check's error to report, not the pool's
            continue
        for spec in wanted:
            specs.setdefault(spec_key(spec), spec)
    return list(specs.values())
