"""Manifest × environment → every check instance per scope point, runnable here or why not.

Each kind plans its own instances (``Kind.plan``, in its package's ``plan.py``, where the
docstring says which dimensions it covers), in the registry's order; the `Planner` gives it the
manifest, the deployments and hardware setups, and ``make``, which decides whether an instance
is runnable here. An instance is runnable when this machine has the hardware, the Python
dependencies, the dependency builds the manifest allows and the target the check needs; otherwise ``reason_code`` says which ("hardware",
"dependency", "target", "out_of_scope", "manifest") and ``reason`` says exactly what is missing.
Cost estimates are rough (order of magnitude), for planning shards, not promises.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any, Protocol

from fasttrack.environment import Environment
from fasttrack.manifest import Manifest, ScopePoint
from fasttrack.manifest.narrowing import narrowed_points, within
from fasttrack.manifest.sections import LEFT_OUT
from fasttrack.plan.arms import per_arm
from fasttrack.plan.blockers import Blocker, build_blocker, hardware_blocker, target_blocker
from fasttrack.plan.instance import CheckInstance
from fasttrack.plan.servers import SharedServer, shared_servers
from fasttrack.targets.registry import TARGET_KINDS

# Where a missing program comes from, for the reason text.
COMMAND_HINTS = {"compute-sanitizer": " (CUDA toolkit)"}
# Rough decode rates used for estimates (tokens per second, one side).
_RATE_CPU, _RATE_GPU = 400.0, 4000.0


class Needs(Protocol):
    """What running a kind's checks needs here (`fasttrack.kinds.base.Execution`)."""

    @property
    def drives_target(self) -> bool: ...
    @property
    def modules_needed(self) -> tuple[str, ...]: ...
    @property
    def commands_needed(self) -> tuple[str, ...]: ...


class Plannable(Protocol):
    """What the planner needs of a check kind (`fasttrack.kinds.base.Kind` satisfies it)."""

    @property
    def execution(self) -> Needs: ...

    def plan(self, planner: Planner) -> Iterable[CheckInstance]: ...


Kinds = Mapping[str, Plannable]  # the registry, as the planner receives it


@dataclass(frozen=True)
class Plan:
    manifest: Manifest
    environment: Environment
    instances: tuple[CheckInstance, ...]
    kinds: tuple[str, ...] = ()  # the registry's kinds, in plan order
    servers: tuple[SharedServer, ...] = ()  # a shared-server target's servers (fasttrack.plan.servers)

    def runnable(self) -> tuple[CheckInstance, ...]:
        return tuple(i for i in self.instances if i.runnable)

    def narrowed(self) -> tuple[dict[str, Any], ...]:
        """Checks the manifest runs at fewer hardware setups than its scope (``points``), for the
        evidence (``plan.narrowed``): a declared choice a reviewer has to accept."""
        return tuple(
            {"check": label, "points": {dim: list(values) for dim, values in points.items()}}
            for _path, label, points in narrowed_points(self.manifest.data)
        )

    def not_runnable(self) -> tuple[CheckInstance, ...]:
        return tuple(i for i in self.instances if not i.runnable)

    def by_kind(self) -> dict[str, tuple[CheckInstance, ...]]:
        order = self.kinds or tuple(dict.fromkeys(i.kind for i in self.instances))
        return {
            kind: tuple(i for i in self.instances if i.kind == kind)
            for kind in order
            if any(i.kind == kind for i in self.instances)
        }

    def missing(self) -> dict[str, int]:
        """What is missing here, with how many instances each blocks (most first)."""
        counts: dict[str, int] = {}
        for inst in self.not_runnable():
            key = f"{inst.reason_code}: {inst.needs}" if inst.needs else str(inst.reason_code)
            counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def summary(self) -> str:
        text = f"{len(self.runnable())} of {len(self.instances)} check instances runnable here"
        missing = self.missing()
        if missing:
            text += "; missing: " + "; ".join(f"{what} ({n})" for what, n in missing.items())
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "manifest": {"path": str(self.manifest.path), "sha256": self.manifest.sha256, "id": self.manifest.id},
            "environment": self.environment.to_dict(),
            "dependencies": {name: dict(build) for name, build in self.environment.dependencies.items()},
            "summary": self.summary(),
            "runnable": len(self.runnable()),
            "total": len(self.instances),
            "est_seconds_runnable": round(sum(i.est_seconds for i in self.runnable()), 1),
            # the scope's dimensions and their values, and its deployments (hardware x engine)
            "dimensions": {name: list(values) for name, values in self.manifest.scope.dimension_values().items()},
            "deployments": [p.as_dict() for p in self.manifest.deployments()],
            "instances": [i.to_dict() for i in self.instances],
            "servers": [s.to_dict() for s in self.servers],
        }


def build_plan(manifest: Manifest, environment: Environment, kinds: Kinds) -> Plan:
    """Every kind's instances, in the registry's order."""
    planner = Planner(manifest, environment, kinds)
    drives = {name for name, kind in kinds.items() if kind.execution.drives_target}
    # rival arms: each check that compares a candidate with stock once per arm (fasttrack.plan.arms)
    compares = {name: name in drives and not getattr(kinds[name].execution, "stock_only", False) for name in kinds}
    instances = tuple(per_arm(manifest, (i for kind in kinds.values() for i in kind.plan(planner)), compares))
    servers = shared_servers(manifest, instances, drives, planner.target)
    return Plan(manifest, environment, instances, tuple(kinds), servers)


class Planner:
    """What a kind's ``plan`` gets: the manifest (``m``), this machine (``env``), the deployments
    (``setups``: hardware setups × engine dimensions) and hardware setups (``hardware``), and
    ``make``/``instance``, which name an instance and decide whether it can run here."""

    def __init__(self, manifest: Manifest, env: Environment, kinds: Kinds):
        self.m = manifest
        self.env = env
        self.kinds = kinds
        self.setups = manifest.deployments()  # hardware setups x engine dimensions
        self.hardware = manifest.hardware_setups()
        self.target = TARGET_KINDS.get(manifest.target.kind)
        self._target_blocker = target_blocker(manifest, TARGET_KINDS)
        self._build_blocker = build_blocker(manifest, env)  # a dependency build the manifest does not allow

    def make(
        self,
        kind: str,
        name: str,
        point: ScopePoint,
        required: bool,
        est: float,
        config: Any,
        timeout: float | None = None,
        command: str | None = None,  # a program this instance needs on PATH (vllm bench serve)
        module: str | None = None,  # a Python module it needs here (sglang, for sglang.bench_serving)
    ) -> CheckInstance:
        """An instance at ``point``, blocked by what this machine lacks for it."""
        drives = self.kinds[kind].execution.drives_target
        blocker = (
            hardware_blocker(self.m, self.env, point)
            or self._build_blocker
            or self.dependency_blocker(kind)
            or self._command_blocker(command)
            or self._module_blocker(module)
            or (self._target_blocker if drives else None)
            or (self._unservable(point) if drives else None)
        )
        return self.instance(kind, name, point, required, blocker, est, self.m.timeout_for(kind, timeout), config or {})

    @staticmethod
    def instance(
        kind: str,
        name: str,
        point: ScopePoint | None,
        required: bool,
        blocker: Blocker | None,
        est: float,
        timeout: float,
        config: dict,
    ) -> CheckInstance:
        """An instance as given (``point`` None: a global check), runnable unless ``blocker``."""
        ident = f"{kind}/{name}" + (f"@{point.id}" if point is not None else "")
        return CheckInstance(
            ident,
            kind,
            name,
            point,
            required,
            blocker is None,
            None if blocker is None else blocker.code,
            None if blocker is None else blocker.reason,
            None if blocker is None else blocker.needs,
            est,
            timeout,
            config,
        )

    def narrowed(self, points: Mapping[str, Any]) -> list[ScopePoint]:
        """The hardware setups a check declared with ``points`` runs at (all when it names none)."""
        return [setup for setup in self.setups if within(setup, points)]

    def at_every_dtype(self, points: Iterable[ScopePoint]) -> list[ScopePoint]:
        """Each point once per dtype the scope declares, the point carrying ``dtype`` (the target
        is opened at it: the in-process factory's ``dtype=``, a server's ``{dtype}``); the points
        as given when the scope declares none. For the checks that compare numerics end to end:
        a bug of one format (a mask or position computed in bf16) is bit-identical to stock in
        another, so a check run at the target's default dtype alone cannot see it."""
        dtypes = self.m.scope.dtypes
        if not dtypes:
            return list(points)
        return [ScopePoint.of({**point.as_dict(), "dtype": dtype}) for point in points for dtype in dtypes]

    def arm_here(self, arm: str, point: ScopePoint) -> bool:
        """An ablation arm runs inside the ablation's points, and only where its switch (the one on
        alone, or the one left out) has an effect (the switch's own ``points``): elsewhere it would
        time stock against stock, or all on against all on."""
        switch = next(s for s in self.m.switches if s.name == arm.removeprefix(LEFT_OUT))
        ablation_points = self.m.ablation.points if self.m.ablation is not None else {}
        return within(point, ablation_points) and switch.acts_at(point)

    def dependency_blocker(self, kind: str) -> Blocker | None:
        execution = self.kinds[kind].execution
        for module in execution.modules_needed:
            if find_spec(module) is None:
                return Blocker(
                    "dependency",
                    f"the Python module {module!r} is not installed here (pip install 'fasttrack[gate]')",
                    module,
                )
        for command in execution.commands_needed:
            if shutil.which(command) is None:
                return Blocker("dependency", f"{command}{COMMAND_HINTS.get(command, '')} is not on PATH here", command)
        return None

    def _unservable(self, point: ScopePoint) -> Blocker | None:
        """A point whose settings the target cannot be told (a dtype its servers do not vary)."""
        reason = self.target.unservable(self.m, point.as_dict()) if self.target is not None else None
        if reason is None:
            return None
        return Blocker("target", reason, f"a {self.m.target.kind} target serving {point.get('dtype')}")

    @staticmethod
    def _command_blocker(command: str | None) -> Blocker | None:
        if command is None or shutil.which(command) is not None:
            return None
        return Blocker(
            "dependency", f"{command} is not on PATH here (`{command} bench serve` runs this benchmark)", command
        )

    @staticmethod
    def _module_blocker(module: str | None) -> Blocker | None:
        if module is None or find_spec(module) is not None:
            return None
        return Blocker(
            "dependency",
            f"the Python module {module!r} is not installed here (`python -m {module}.bench_serving` runs this benchmark)",
            module,
        )

    def startup(self) -> float:
        """Rough seconds to open the target's two sides (its kind's estimate)."""
        return self.target.startup_s if self.target is not None else 5.0

    @staticmethod
    def is_cpu(point: ScopePoint) -> bool:
        return str(point.get("accelerator", "")).strip().lower() == "cpu"

    def rate(self, point: ScopePoint) -> float:
        """Rough decode tokens per second of one side at ``point``."""
        return _RATE_CPU if self.is_cpu(point) else _RATE_GPU
