"""Manifest × environment → every check instance per scope point, runnable here or why not.

Which dimensions each kind of check covers (one instance per projected scope point):

- ``scope_diff``: one global instance (no scope point): changed files vs ``model.code_paths``.
- ``switch`` (proof of path), ``divergence``, ``evals`` (each eval), ``features`` (each preserved
  feature) and ``stress`` audits: one per hardware setup (accelerator, device_count,
  tensor_parallel): they drive the whole model, and each deployment is a different code path.
  An eval or the divergence check may narrow this with ``points`` (declared, so reviewable).
- ``sanitizer`` audits (compute-sanitizer): one per GPU hardware setup.
- ``kernels``: accelerator and device_count plus the dimensions the suite ``covers``.
- ``speculative``: each hardware setup × each draft length.
- ``benchmarks``: each hardware setup allowed by the benchmark's ``points`` × its other point
  dimensions.
- ``claims``: one global instance per benchmark claim: the claims lint (comparable setups, labels
  for special conditions); it reads only the manifest, so it runs on any machine. Whether a claim
  is reproduced is judged by the benchmarks check at the points it measures.

An instance is runnable when this machine has the hardware, the Python dependencies and the
target the check needs; otherwise ``reason_code`` says which ("hardware", "dependency",
"target", "out_of_scope", "manifest") and ``reason`` says exactly what is missing.
Cost estimates are rough (order of magnitude), for planning shards, not promises.
"""

from __future__ import annotations

import glob
import itertools
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from fasttrack.environment import Environment
from fasttrack.instance import CheckInstance
from fasttrack.manifest import HARDWARE_DIMENSIONS, Manifest, ScopePoint
from fasttrack.manifest.model import HardwareEntry, thaw
from fasttrack.manifest.narrowing import narrowed_points, within
from fasttrack.runners import KINDS

# Plan order, from the kinds table (fasttrack.runners.KINDS).
CHECK_KINDS: tuple[str, ...] = tuple(KINDS)
# Where a missing program comes from, for the reason text.
COMMAND_HINTS = {"compute-sanitizer": " (CUDA toolkit)"}
# Rough decode rates used for estimates (tokens per second, one side).
_RATE_CPU, _RATE_GPU = 400.0, 4000.0
_SERVER_START_S = 30.0


@dataclass(frozen=True)
class Plan:
    manifest: Manifest
    environment: Environment
    instances: tuple[CheckInstance, ...]

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
        return {
            kind: tuple(i for i in self.instances if i.kind == kind)
            for kind in CHECK_KINDS
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
            "summary": self.summary(),
            "runnable": len(self.runnable()),
            "total": len(self.instances),
            "est_seconds_runnable": round(sum(i.est_seconds for i in self.runnable()), 1),
            "instances": [i.to_dict() for i in self.instances],
        }


def build_plan(manifest: Manifest, environment: Environment) -> Plan:
    return Plan(manifest, environment, tuple(_Planner(manifest, environment).instances()))


@dataclass(frozen=True)
class _Blocker:
    code: str
    reason: str
    needs: str


class _Planner:
    def __init__(self, manifest: Manifest, env: Environment):
        self.m = manifest
        self.env = env
        self.setups = manifest.hardware_setups()
        self._target_blocker = self._find_target_blocker()

    # -- instance generation ---------------------------------------------------------------

    def instances(self) -> Iterable[CheckInstance]:
        m = self.m
        yield self._scope_diff()
        for point in self.setups:
            yield self.make("switch", m.switch.name, point, True, 30.0 + self._startup(), m.section("switch"))
        for test in m.kernel_tests:
            dims = ("accelerator", "device_count", *test.covers)
            for point in m.scope_points(dims):
                yield self.make(
                    "kernels",
                    test.id,
                    point,
                    test.required,
                    2.0 if self._is_cpu(point) else 1.0,
                    thaw(test.raw),
                    timeout=test.timeout_s,
                )
        for audit in m.audits:
            if audit.kind == "stress":
                cost = 0.5 * audit.repeats * max(1, len(audit.delays_us))
                for point in self.setups:
                    yield self.make(
                        "stress", audit.id, point, audit.required, cost, thaw(audit.raw), timeout=audit.timeout_s
                    )
            else:
                yield from self._sanitizer(audit)
        for ev in m.evals:
            items = ev.limit or 200
            tokens = ev.generation.get("max_tokens", 256)
            for point in self._narrowed(ev.points):
                cost = 2 * ev.repeats * items * tokens / self._rate(point) + self._startup()
                yield self.make("evals", ev.id, point, ev.required, cost, thaw(ev.raw), timeout=ev.timeout_s)
        if m.divergence is not None:
            d = m.divergence
            cost = max(1, len(d.buckets) - 1) * (d.max_prompts or 8) * 2.0
            for point in self._narrowed(d.points):
                yield self.make(
                    "divergence",
                    "token_kl",
                    point,
                    d.required,
                    cost + self._startup(),
                    thaw(d.raw),
                    timeout=d.timeout_s,
                )
        for probe in m.features:
            if not probe.enabled:
                continue
            s = probe.settings
            cost = 20.0
            if probe.name == "temperature_sampling":
                cost = (
                    0.05 * 2 * s.get("samples", 400) * len(s.get("temperatures", (1.0,))) * len(s.get("top_p", (1.0,)))
                )
            config = {"name": probe.name, **thaw(s)}
            for point in self._narrowed(probe.points):
                yield self.make(
                    "features",
                    probe.name,
                    point,
                    probe.required,
                    cost + self._startup(),
                    config,
                    timeout=probe.timeout_s,
                )
        if m.scope.speculative is not None:
            spec = m.scope.speculative
            config = m.section("scope")["speculative"]
            for point in m.scope_points((*HARDWARE_DIMENSIONS, "draft_length")):
                if within(point, spec.points):
                    yield self.make("speculative", spec.method, point, True, 20.0 + self._startup(), config)
        for bench in m.benchmarks:
            yield from self._benchmark(bench)
        yield from self._claims()

    def _narrowed(self, points: Mapping[str, Any]) -> list[ScopePoint]:
        """The hardware setups a check declared with ``points`` runs at (all when it names none)."""
        return [setup for setup in self.setups if within(setup, points)]

    def _scope_diff(self) -> CheckInstance:
        timeout = self.m.timeout_for("scope_diff")
        config = {"code_paths": list(self.m.model.code_paths), "allowed_paths": list(self.m.model.allowed_paths)}
        blocker = self._dependency_blocker("scope_diff")
        if blocker is None and not (self.m.root / ".git").exists():
            blocker = _Blocker(
                "target",
                f"{self.m.root.name or self.m.root} is not a git repository: nothing to diff",
                "git repository",
            )
        elif blocker is None and not self._code_paths_exist():
            patterns = ", ".join(self.m.model.code_paths)
            blocker = _Blocker(
                "target",
                f"no file in this repository matches model.code_paths ({patterns}); run the gate in the repository that holds the model's code",
                "the model's repository",
            )
        return self._instance("scope_diff", "code_paths", None, True, blocker, 2.0, timeout, config)

    def _claims(self) -> Iterable[CheckInstance]:
        """The claims lint: pure manifest data, no hardware, no target."""
        timeout = self.m.timeout_for("claims")
        for bench in self.m.section("benchmarks") or ():
            for claim in bench.get("claims") or ():
                yield self._instance(
                    "claims", str(claim["id"]), None, True, None, 0.1, timeout, {"benchmark": bench, "claim": claim}
                )

    def _sanitizer(self, audit: Any) -> Iterable[CheckInstance]:
        gpu_setups = [p for p in self.setups if not self._is_cpu(p)]
        if not gpu_setups:
            blocker = _Blocker(
                "out_of_scope",
                "compute-sanitizer needs an NVIDIA GPU and the scope declares none",
                "a GPU in the scope",
            )
            yield self._instance(
                "sanitizer",
                audit.id,
                None,
                audit.required,
                blocker,
                0.0,
                self.m.timeout_for("sanitizer", audit.timeout_s),
                thaw(audit.raw),
            )
            return
        for point in gpu_setups:
            yield self.make(
                "sanitizer", audit.id, point, audit.required, 300.0, thaw(audit.raw), timeout=audit.timeout_s
            )

    def _benchmark(self, bench: Any) -> Iterable[CheckInstance]:
        points = bench.points
        other = {k: v for k, v in points.items() if k not in HARDWARE_DIMENSIONS}
        workload = bench.workload
        for setup in self._narrowed({k: v for k, v in points.items() if k in HARDWARE_DIMENSIONS}):
            rate = self._rate(setup)
            cost = 2 * bench.repeats * workload.get("requests", 8) * workload.get("output_tokens", 128) / rate
            for combo in _product(other):
                point = ScopePoint.of({**setup.as_dict(), **combo})
                yield self.make(
                    "benchmarks",
                    bench.id,
                    point,
                    bench.required,
                    max(10.0, cost) + self._startup(),
                    thaw(bench.raw),
                    timeout=bench.timeout_s,
                )

    # -- runnable or not -------------------------------------------------------------------

    def make(
        self,
        kind: str,
        name: str,
        point: ScopePoint,
        required: bool,
        est: float,
        config: Any,
        timeout: float | None = None,
    ) -> CheckInstance:
        blocker = (
            self._hardware_blocker(point)
            or self._dependency_blocker(kind)
            or (self._target_blocker if KINDS[kind].drives_target else None)
        )
        return self._instance(
            kind, name, point, required, blocker, est, self.m.timeout_for(kind, timeout), config or {}
        )

    @staticmethod
    def _instance(
        kind: str,
        name: str,
        point: ScopePoint | None,
        required: bool,
        blocker: _Blocker | None,
        est: float,
        timeout: float,
        config: dict,
    ) -> CheckInstance:
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

    def _hardware_blocker(self, point: ScopePoint) -> _Blocker | None:
        accelerator = point.get("accelerator")
        if accelerator is None or self._is_cpu(point):
            return None
        entry = self.m.hardware_entry_for(point)
        needed = point.get("device_count") or point.get("tensor_parallel") or 1
        where = f"scope hardware entry {entry.index + 1}" if entry else "the scope"
        have = self.env.count_of(accelerator)
        if have < needed:
            link = _link_text(entry) if needed > 1 else ""
            return _Blocker(
                "hardware",
                f"needs {accelerator} x{needed}{link} ({where}); this machine has: {self.env.describe()}",
                f"{accelerator} x{needed}",
            )
        if needed > 1 and entry is not None and entry.interconnect == "nvlink" and self.env.interconnect != "nvlink":
            return _Blocker(
                "hardware",
                f"needs {needed} {accelerator} GPUs linked by NVLink ({where}); this machine's GPUs are linked by {self.env.interconnect}",
                f"{accelerator} x{needed} over nvlink",
            )
        return None

    @staticmethod
    def _dependency_blocker(kind: str) -> _Blocker | None:
        spec = KINDS[kind]
        for module in spec.modules_needed:
            if find_spec(module) is None:
                return _Blocker(
                    "dependency",
                    f"the Python module {module!r} is not installed here (pip install 'fasttrack[gate]')",
                    module,
                )
        for command in spec.commands_needed:
            if shutil.which(command) is None:
                return _Blocker("dependency", f"{command}{COMMAND_HINTS.get(command, '')} is not on PATH here", command)
        return None

    def _find_target_blocker(self) -> _Blocker | None:
        target = self.m.target
        if target.kind == "python" and target.python is not None:
            module = target.python.factory.split(":", 1)[0]
            base = self.m.resolve_path(target.python.path) if target.python.path else self.m.root
            relative = Path(*module.split("."))
            if not (
                (base / relative).with_suffix(".py").exists()
                or (base / relative / "__init__.py").exists()
                or find_spec(module.split(".")[0]) is not None
            ):
                return _Blocker(
                    "target", f"the target factory module {module!r} is not under {base} and not installed", module
                )
            return None
        if target.kind == "openai" and target.openai is not None:
            for side in ("baseline", "candidate"):
                conf = getattr(target.openai, side)
                if conf.command and shutil.which(conf.command[0]) is None:
                    return _Blocker(
                        "target",
                        f"{conf.command[0]!r} (target.openai.{side}.command) is not installed here",
                        conf.command[0],
                    )
        return None

    # -- helpers ---------------------------------------------------------------------------

    def _code_paths_exist(self) -> bool:
        root = self.m.root
        for pattern in self.m.model.code_paths:
            for match in glob.iglob(pattern, root_dir=str(root), recursive=True):
                if (root / match).is_file():  # glob yields 'missing/' for 'missing/**'
                    return True
        return False

    def _startup(self) -> float:
        return _SERVER_START_S if self.m.target.kind == "openai" else 5.0

    @staticmethod
    def _is_cpu(point: ScopePoint) -> bool:
        return str(point.get("accelerator", "")).strip().lower() == "cpu"

    def _rate(self, point: ScopePoint) -> float:
        return _RATE_CPU if self._is_cpu(point) else _RATE_GPU


def _link_text(entry: HardwareEntry | None) -> str:
    if entry is None or not entry.interconnect or entry.interconnect in ("none", "loopback"):
        return ""
    text = f" over {entry.interconnect}"
    if entry.nvlink_domain == "single":
        text += " in one NVLink domain"
    return text


def _product(dims: Mapping[str, tuple]) -> Iterable[dict[str, Any]]:
    names = list(dims)
    for combo in itertools.product(*(dims[n] for n in names)):
        yield dict(zip(names, combo))


# -- text rendering (fasttrack plan) -----------------------------------------------------------


def format_seconds(seconds: float) -> str:
    if seconds < 90:
        return f"~{seconds:.0f}s"
    if seconds < 5400:
        return f"~{seconds / 60:.0f}m"
    return f"~{seconds / 3600:.1f}h"


def hardware_label(point: ScopePoint | None) -> str:
    """Short name of a point's hardware setup: 'cpu tp2', 'NVIDIA GB300 x16 tp8'."""
    if point is None or point.get("accelerator") is None:
        return "global"
    accelerator = point.get("accelerator")
    tp = point.get("tensor_parallel")
    text = accelerator if str(accelerator).lower() == "cpu" else f"{accelerator} x{point.get('device_count', 1)}"
    return text + (f" tp{tp}" if tp is not None else "")


def render_plan_table(plan: Plan, group: bool = True) -> str:
    """The plan as text, grouped by check kind. With ``group`` one row per (check, outcome):
    hardware setups are named, other scope dimensions counted (``group=False``: every instance)."""
    env = plan.environment
    lines = [
        f"manifest: {plan.manifest.path} ({plan.manifest.id}, sha256 {plan.manifest.sha256[:12]})",
        f"this machine: {env.describe()}; {env.os}; Python {env.python}",
        "",
    ]
    for kind, instances in plan.by_kind().items():
        runnable = sum(1 for i in instances if i.runnable)
        lines.append(f"{kind}: {runnable} of {len(instances)} runnable here")
        rows = (
            _grouped_rows(instances)
            if group
            else [(i.id, _status(i), format_seconds(i.est_seconds)) for i in instances]
        )
        width = min(max(len(r[0]) for r in rows), 70)
        for label, status, cost in rows:
            lines.append(f"  {label.ljust(width)}  {cost:>6}  {status}")
        lines.append("")
    total = sum(i.est_seconds for i in plan.runnable())
    lines.append(f"{plan.summary()}")
    lines.append(f"estimated time of the runnable instances: {format_seconds(total)} (rough)")
    return "\n".join(lines)


def _status(inst: CheckInstance) -> str:
    if inst.runnable:
        return "runnable" + ("" if inst.required else " (optional)")
    return f"NOT RUNNABLE [{inst.reason_code}] {inst.reason}"


def _grouped_rows(instances: tuple[CheckInstance, ...]) -> list[tuple[str, str, str]]:
    groups: dict[tuple, list[CheckInstance]] = {}
    for inst in instances:
        groups.setdefault((inst.name, inst.runnable, inst.reason), []).append(inst)
    rows = []
    for (name, _, _), members in groups.items():
        setups = list(dict.fromkeys(hardware_label(m.scope_point) for m in members))
        label = name if setups == ["global"] else f"{name} [{', '.join(setups)}]"
        extra = sorted({d for m in members if m.scope_point for d in m.scope_point.names()} - set(HARDWARE_DIMENSIONS))
        if extra:
            label += f" x {len(members)} point{'s' if len(members) > 1 else ''} over {', '.join(extra)}"
        rows.append((label, _status(members[0]), format_seconds(sum(m.est_seconds for m in members))))
    return rows
