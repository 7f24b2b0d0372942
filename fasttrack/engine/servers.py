"""The run's shared target servers (`fasttrack.targets.pool`): one server per side per scope point
for a target kind that shares them (``vllm``), started when a check first asks (the run's first
point in the background at once, while checks that need no server run), and stopped once the
point's last check that drives the target is done, unless a later point runs the very same
server (points that differ only in what the server is not told, e.g. the batch size). A benchmark
with server settings of its own (``setups.<side>.engine_args``) and an ablation or rival arm ask
for servers of their own (an arm's candidate; the stock server stays one for all the arms): those
stop once the last check that asks for them is done."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fasttrack.kinds.base import Kinds
from fasttrack.manifest import Manifest
from fasttrack.plan.instance import CheckInstance
from fasttrack.plan.servers import uses_shared_servers
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
    """What a check changes about the servers it asks for (an ablation or rival arm's switches, a
    benchmark's own ``engine_args``): "" for the point's plain servers."""
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
        drives = {name for name, spec in kinds.items() if spec.execution.drives_target}
        self.driving = [i for i in selected if uses_shared_servers(i, drives)]
        self.remaining = Counter(_group(i) for i in self.driving)
        self.points = {point_id(i): i.scope_point for i in self.driving}
        self.groups: dict[tuple[str, str], tuple[Any, Manifest, Sides]] = {}
        for i in self.driving:  # a group's point, the manifest its checks run, the sides they ask for
            self.groups.setdefault(
                _group(i), (i.scope_point, manifest.for_config(i.config), manifest.server_sides(i.config))
            )
        self._lock = threading.Lock()
        self.pool = ServerPool(folder)
        self.service = PoolService(self.pool)
        if self.driving:  # the first point's servers start now, beside the checks that need none
            self.pool.prestart(self._specs(_group(self.driving[0])))
            ahead = threading.Thread(target=self._start_next, args=(_group(self.driving[0]),), daemon=True)
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
            keep = {spec_key(s) for g in self.remaining for s in self._specs(g)}

        def kept(key: Key) -> bool:
            return key in keep

        for line in self.pool.release(kept):
            self.message(line)

    def close(self) -> None:
        self.service.close()

    def _start_next(self, first: tuple[str, str]) -> None:
        """Once the first point's servers answer, start the next CPU point's (host memory: an
        accelerator's point waits for its turn), so that its servers' start overlaps the first
        point's checks instead of following them."""
        started = {spec_key(s) for s in self._specs(first)}
        # the next point that needs servers of its own: a point that differs only in a dimension
        # the servers do not see (a dtype the one server serves) shares the first point's
        point, ahead = None, []
        for group in (g for g in self.groups if g[0] != first[0]):
            ahead = [s for s in self._specs(group) if spec_key(s) not in started]
            if ahead:
                point = self.groups[group][0]
                break
        if point is None or not is_cpu_point(point):
            return
        # A CPU server computes on a core of its own: started beside the first pair on fewer cores
        # than servers, they take those cores from it (the vLLM example's main job on 2 cores:
        # 406 s with its drafting pair started ahead, 256 s without).
        if len(started) + len(ahead) > len(os.sched_getaffinity(0)):
            return
        try:
            self.pool.acquire(self._specs(first))
        except Exception:  # the first point's checks report a server that did not start
            return
        self.pool.prestart(ahead)

    def _specs(self, group: tuple[str, str]) -> list:
        """The servers a group's checks ask for (`point_specs`)."""
        point, manifest, sides = self.groups[group]
        values = point.as_dict() if point is not None and hasattr(point, "as_dict") else None
        return point_specs(self.spec_of, [(manifest, sides)], values)


Sides = tuple[str, ...]


def point_manifests(
    manifest: Manifest, driving: Sequence[CheckInstance]
) -> dict[str, dict[str, tuple[Manifest, Sides]]]:
    """Per point, the manifests its checks open their sides with and the sides they ask for: each
    ablation or rival arm's candidate is a server of its own (with a benchmark's own engine_args,
    one more), the stock server one for all the arms."""
    found: dict[str, dict[str, tuple[Manifest, Sides]]] = {}
    for i in driving:
        own, sides = manifest.for_config(i.config), manifest.server_sides(i.config)
        key = repr((own.candidate_switches, sorted(own.side_args.items()), sides))
        found.setdefault(point_id(i), {}).setdefault(key, (own, sides))
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


def _group(instance: CheckInstance) -> tuple[str, str]:
    return point_id(instance), own_settings(instance)
