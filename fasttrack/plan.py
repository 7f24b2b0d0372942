"""Manifest × environment → every check instance per scope point, runnable here or why not.

Which dimensions each kind of check covers (one instance per projected scope point):

- ``scope_diff``: one global instance (no scope point): changed files vs ``model.code_paths``.
- ``switch`` (proof of path), ``divergence``, ``evals`` (each eval) and ``features`` (each
  preserved feature): one per deployment (hardware setup: accelerator, device_count,
  tensor_parallel, times the scope's engine dimensions such as kv_cache_dtype or
  decode_context_parallel): they drive the whole model, and each deployment is a different code
  path. An eval or the divergence check may narrow this with ``points`` (declared, so reviewable).
- ``stress`` audits: one per hardware setup (they test kernels; engine settings do not reach them).
- ``sanitizer`` audits (compute-sanitizer): one per GPU hardware setup.
- ``kernels``: accelerator and device_count plus the dimensions the suite ``covers``; a suite
  covering ``batch`` has one more instance per accelerator and device_count, ``<suite>:between``:
  the batch sizes between the declared points (every size of a range up to 256 wide, else a
  sample seeded by the head commit; the other dimensions at their first values), run in the
  same pytest session.
- ``speculative``: each deployment × each draft length.
- ``benchmarks``: each deployment allowed by the benchmark's ``points`` × its other point
  dimensions; ablation arms (``<id>~<switch>``) likewise, at the ablation's ``points``.
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

from fasttrack.claims import DETECTED_KEY
from fasttrack.environment import Environment
from fasttrack.instance import CheckInstance
from fasttrack.manifest import HARDWARE_DIMENSIONS, Manifest, ScopePoint
from fasttrack.manifest.acceptance import benchmark_synthetic, describe, in_target
from fasttrack.manifest.model import HardwareEntry, thaw
from fasttrack.manifest.narrowing import narrowed_points, within
from fasttrack.runners import KINDS

# The kernel-test instance of a suite that checks the batch sizes between the declared points.
BETWEEN_SUFFIX = ":between"
# An ablation arm's check name: "<benchmark or eval id>~<switch>" (config["arm"] lists its switches).
ARM_SEPARATOR = "~"
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
            # the scope's dimensions and their values, and its deployments (hardware x engine)
            "dimensions": {name: list(values) for name, values in self.manifest.scope.dimension_values().items()},
            "deployments": [p.as_dict() for p in self.manifest.deployments()],
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
        self.setups = manifest.deployments()  # hardware setups x engine dimensions
        self.hardware = manifest.hardware_setups()
        self._target_blocker = self._find_target_blocker()

    # -- instance generation ---------------------------------------------------------------

    def instances(self) -> Iterable[CheckInstance]:
        m = self.m
        yield self._scope_diff()
        switch_name = m.switch.name if len(m.switches) == 1 else "switches"
        switch_config = {"switches": [thaw(s) for s in (m.section("switches") or [m.section("switch")])]}
        for point in self.setups:
            yield self.make("switch", switch_name, point, True, 30.0 + self._startup(), switch_config)
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
            if "batch" in test.covers and m.scope.batch is not None:
                # the batch sizes between the declared points, run in the same pytest session
                for point in m.scope_points(("accelerator", "device_count")):
                    yield self.make(
                        "kernels",
                        f"{test.id}{BETWEEN_SUFFIX}",
                        point,
                        test.required,
                        5.0,
                        {**thaw(test.raw), "between_points": True},
                        timeout=test.timeout_s,
                    )
        for audit in m.audits:
            if audit.kind == "stress":
                cost = 0.5 * audit.repeats * max(1, len(audit.delays_us))
                for point in self.hardware:  # a test of the kernels: the engine settings do not reach it
                    yield self.make(
                        "stress", audit.id, point, audit.required, cost, thaw(audit.raw), timeout=audit.timeout_s
                    )
            else:
                yield from self._sanitizer(audit)
        for ev in m.evals:
            yield from self._eval(ev)
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
        if m.stock_unchanged is not None:
            check = m.stock_unchanged
            for point in self._narrowed(check.points):
                yield self.make(
                    "stock_unchanged",
                    "greedy",
                    point,
                    check.required,
                    20.0 + 2 * self._startup(),
                    thaw(check.raw),
                    timeout=check.timeout_s,
                )
        if m.scope.speculative is not None:
            spec = m.scope.speculative
            config = m.section("scope")["speculative"]
            for point in m.scope_points((*m.scope.deployment_dimensions(), "draft_length")):
                if within(point, spec.points):
                    yield self.make("speculative", spec.method, point, True, 20.0 + self._startup(), config)
        for bench in m.benchmarks:
            yield from self._benchmark(bench)
        yield from self._ablation()
        yield from self._claims()

    def _eval(self, ev: Any, arm: str | None = None, required: bool | None = None) -> Iterable[CheckInstance]:
        items = ev.limit or 200
        tokens = ev.generation.get("max_tokens", 256)
        name, config = ev.id, thaw(ev.raw)
        if arm is not None:
            name, config = f"{ev.id}{ARM_SEPARATOR}{arm}", {**config, "arm": [arm]}
        for point in self._narrowed(ev.points):
            if arm is not None and not self._arm_here(arm, point):
                continue
            cost = 2 * ev.repeats * items * tokens / self._rate(point) + self._startup()
            yield self.make(
                "evals",
                name,
                point,
                ev.required if required is None else required,
                cost,
                config,
                timeout=ev.timeout_s,
            )

    def _ablation(self) -> Iterable[CheckInstance]:
        """Each switch alone, against stock: the listed benchmarks and evals once per switch (the
        candidate turns on only that switch; `fasttrack.engine` runs them with `Manifest.for_arm`)."""
        ablation = self.m.ablation
        if ablation is None:
            return
        benchmarks = {b.id: b for b in self.m.benchmarks}
        evals = {e.id: e for e in self.m.evals}
        for switch in self.m.switches:
            for ident in ablation.benchmarks:
                bench = benchmarks[ident]
                yield from self._benchmark(bench, arm=switch.name, required=ablation.required and bench.required)
            for ident in ablation.evals:
                ev = evals[ident]
                yield from self._eval(ev, arm=switch.name, required=ablation.required and ev.required)

    def _arm_here(self, arm: str, point: ScopePoint) -> bool:
        """An ablation arm runs inside the ablation's points, and only where its switch has an
        effect (the switch's own ``points``): elsewhere it would time stock against stock."""
        switch = next(s for s in self.m.switches if s.name == arm)
        ablation_points = self.m.ablation.points if self.m.ablation is not None else {}
        return within(point, ablation_points) and within(point, switch.points)

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

    def _synthetic(self, bench: Mapping[str, Any]) -> list[dict[str, Any]]:
        """What forces speculative acceptance on this benchmark's runs (engine flags, env)."""
        return [s.to_dict() for s in benchmark_synthetic(self.m.data, bench)]

    def _claims(self) -> Iterable[CheckInstance]:
        """The claims lint: pure manifest data, no hardware, no target."""
        timeout = self.m.timeout_for("claims")
        for bench in self.m.section("benchmarks") or ():
            detected = self._synthetic(bench)
            if detected:
                bench = {**bench, DETECTED_KEY: detected}
            for claim in bench.get("claims") or ():
                yield self._instance(
                    "claims", str(claim["id"]), None, True, None, 0.1, timeout, {"benchmark": bench, "claim": claim}
                )

    def _sanitizer(self, audit: Any) -> Iterable[CheckInstance]:
        gpu_setups = [p for p in self.hardware if not self._is_cpu(p)]
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

    def _benchmark(self, bench: Any, arm: str | None = None, required: bool | None = None) -> Iterable[CheckInstance]:
        points = bench.points
        deployment = set(self.m.scope.deployment_dimensions())
        other = {k: v for k, v in points.items() if k not in deployment}
        workload = bench.workload
        name, config = bench.id, thaw(bench.raw)
        detected = self._synthetic(config)
        if detected:  # the runs are synthetic: the outcome and every claim measured with them say so
            config[DETECTED_KEY] = detected
        if arm is not None:
            # One arm: stock against this switch alone. Claims are about all switches on.
            config = {**{k: v for k, v in config.items() if k != "claims"}, "arm": [arm]}
            name = f"{bench.id}{ARM_SEPARATOR}{arm}"
        for setup in self._narrowed({k: v for k, v in points.items() if k in deployment}):
            rate = self._rate(setup)
            cost = 2 * bench.repeats * workload.get("requests", 8) * workload.get("output_tokens", 128) / rate
            if arm is not None and not self._arm_here(arm, setup):
                continue
            for combo in _product(other):
                point = ScopePoint.of({**setup.as_dict(), **combo})
                yield self.make(
                    "benchmarks",
                    name,
                    point,
                    bench.required if required is None else required,
                    max(10.0, cost) + self._startup(),
                    config,
                    timeout=bench.timeout_s,
                    command="vllm" if workload.get("kind") == "vllm_bench" else None,
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
        command: str | None = None,  # a program this instance needs on PATH (vllm bench serve)
    ) -> CheckInstance:
        blocker = (
            self._hardware_blocker(point)
            or self._dependency_blocker(kind)
            or self._command_blocker(command)
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
        if entry is not None and entry.compute_capability:
            found = self.env.capabilities_of(accelerator)
            if found != {entry.compute_capability}:
                seen = ", ".join(sorted(found)) or "unknown (no GPU query answered)"
                return _Blocker(
                    "hardware",
                    f"needs {accelerator} with compute capability {entry.compute_capability} "
                    f"(sm_{entry.compute_capability.replace('.', '')}, {where}); this machine's are: {seen}",
                    f"{accelerator} sm_{entry.compute_capability.replace('.', '')}",
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

    @staticmethod
    def _command_blocker(command: str | None) -> _Blocker | None:
        if command is None or shutil.which(command) is not None:
            return None
        return _Blocker(
            "dependency", f"{command} is not on PATH here (`{command} bench serve` runs this benchmark)", command
        )

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
    ]
    engine = plan.manifest.scope.engine_values()
    fixed = {name: values[0] for name, values in engine.items() if len(values) == 1}
    if engine:
        lines.append("engine: " + "; ".join(f"{k} {', '.join(map(str, v))}" for k, v in engine.items()))
    lines.append("")
    for kind, instances in plan.by_kind().items():
        runnable = sum(1 for i in instances if i.runnable)
        lines.append(f"{kind}: {runnable} of {len(instances)} runnable here")
        rows = (
            _grouped_rows(instances, fixed)
            if group
            else [(i.id, _status(i), format_seconds(i.est_seconds)) for i in instances]
        )
        width = min(max(len(r[0]) for r in rows), 70)
        for label, status, cost in rows:
            lines.append(f"  {label.ljust(width)}  {cost:>6}  {status}")
        lines.append("")
    forced = in_target(plan.manifest.data)
    if forced:
        lines.append(
            "synthetic speculative acceptance is set by the target (benchmarks and claims measured with it are "
            f"labelled synthetic): {describe(forced)}"
        )
    total = sum(i.est_seconds for i in plan.runnable())
    lines.append(f"{plan.summary()}")
    lines.append(f"estimated time of the runnable instances: {format_seconds(total)} (rough)")
    return "\n".join(lines)


def _status(inst: CheckInstance) -> str:
    if inst.runnable:
        return "runnable" + ("" if inst.required else " (optional)")
    return f"NOT RUNNABLE [{inst.reason_code}] {inst.reason}"


def _grouped_rows(
    instances: tuple[CheckInstance, ...], fixed: Mapping[str, Any] | None = None
) -> list[tuple[str, str, str]]:
    """``fixed``: dimensions with one value in the whole scope (an engine setting): named once in the
    table's header line, not counted in every row."""
    fixed = fixed or {}
    groups: dict[tuple, list[CheckInstance]] = {}
    for inst in instances:
        groups.setdefault((inst.name, inst.runnable, inst.reason), []).append(inst)
    rows = []
    for (name, _, _), members in groups.items():
        setups = list(dict.fromkeys(hardware_label(m.scope_point) for m in members))
        label = name if setups == ["global"] else f"{name} [{', '.join(setups)}]"
        names = {d for m in members if m.scope_point for d in m.scope_point.names()}
        extra = sorted(names - set(HARDWARE_DIMENSIONS) - set(fixed))
        if extra:
            label += f" x {len(members)} point{'s' if len(members) > 1 else ''} over {', '.join(extra)}"
        rows.append((label, _status(members[0]), format_seconds(sum(m.est_seconds for m in members))))
    return rows
