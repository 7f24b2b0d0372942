"""The frozen, typed manifest model built from validated data: `Manifest`, made of its sections
(`fasttrack.manifest.sections`, whose names this module also gives)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fasttrack.manifest.scope import (
    HARDWARE_DIMENSIONS,
    ScopePoint,
    expand,
    hardware_setups,
)
from fasttrack.manifest.sections import (
    Ablation,
    Audit,
    Benchmark,
    Divergence,
    EvalSpec,
    FeatureProbe,
    HardwareEntry,
    KernelTest,
    ModelSpec,
    Optimisation,
    Scope,
    StockUnchanged,
    Switch,
    Target,
    _empty,
    thaw,
)

DEFAULT_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Manifest:
    """A loaded, validated manifest. Build it with ``load_manifest(path)``."""

    path: Path
    sha256: str  # of the raw file bytes
    root: Path  # repository root: relative paths in the manifest resolve against it
    optimisation: Optimisation
    model: ModelSpec
    switches: tuple[Switch, ...]  # one or more; `switch` is the first (single-switch manifests)
    scope: Scope
    preserve: Mapping[str, bool]
    target: Target
    kernel_tests: tuple[KernelTest, ...]
    evals: tuple[EvalSpec, ...]
    divergence: Divergence | None
    features: tuple[FeatureProbe, ...]
    benchmarks: tuple[Benchmark, ...]
    audits: tuple[Audit, ...]
    timeouts: Mapping[str, Any]
    warnings: tuple[str, ...] = ()  # formatted lint warnings (e.g. claims that are not comparable)
    frozen_data: Mapping[str, Any] = field(default_factory=_empty, repr=False)
    lines: Mapping[tuple[Any, ...], int] = field(default_factory=dict, repr=False, compare=False)
    ablation: Ablation | None = None
    stock_unchanged: StockUnchanged | None = None
    # The switches the candidate side turns on: None means all of them (every check but an
    # ablation arm, which runs with one switch on; see `for_arm`).
    candidate_switches: tuple[str, ...] | None = None
    # Server arguments a check adds to each side's command (a benchmark's ``setups.<side>.engine_args``,
    # `for_config`): its servers are then its own, shared only with checks that add the same.
    side_args: Mapping[str, tuple[str, ...]] = field(default_factory=_empty)

    @property
    def switch(self) -> Switch:
        """The first switch (the only one of a `switch:` manifest)."""
        return self.switches[0]

    @property
    def switch_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.switches)

    def switch_on(self, switch: Switch, side: str) -> bool:
        """Whether ``side`` runs with ``switch`` on: the baseline never, the candidate unless an
        ablation arm leaves it off. A rival arm (``enable.arms``) is on only in its own arm's
        candidate: the arms exclude each other, so "all on" never includes one."""
        if side != "candidate":
            return False
        if self.candidate_switches is None:
            return switch.rival_of is None
        return switch.name in self.candidate_switches

    @property
    def rival_arms(self) -> tuple[str, ...]:
        """The names of the rival arms (one candidate each), empty without ``enable.arms``."""
        return tuple(s.name for s in self.switches if s.rival_of is not None)

    def arm_switches(self, arm: str) -> list[str]:
        """The switches a rival arm's candidate turns on: the arm and every switch that is no arm."""
        return [s.name for s in self.switches if s.rival_of is None or s.name == arm]

    @property
    def switch_check_name(self) -> str:
        """The proof of path's check name: the switch's, or ``switches`` for several declared;
        in a rival arm's candidate ``<that>~<arm>``, as the planner names the arm's instance."""
        declared = self.frozen_data.get("switches") or [self.frozen_data.get("switch") or {"name": self.switch.name}]
        name = str(declared[0]["name"]) if len(declared) == 1 else "switches"
        arm = next((a for a in self.rival_arms if self.candidate_switches and a in self.candidate_switches), None)
        return f"{name}~{arm}" if arm else name

    def option_args(self, side: str) -> list[str]:
        """The options of option-valued switches as ``side`` passes them: ``OPTION VALUE`` of the
        switch it runs with on, else ``OPTION STOCK`` where the stock value is given, else nothing
        (the engine's default)."""
        args: list[str] = []
        for option in dict.fromkeys(s.option for s in self.switches if s.option):
            owners = [s for s in self.switches if s.option == option]
            on = [s for s in owners if self.switch_on(s, side)]
            value = on[0].option_value if on else owners[0].option_stock
            if value is not None:
                args += [option, value]
        return args

    def for_arm(self, names: Sequence[str]) -> Manifest:
        """This manifest as one ablation arm: the candidate turns on only ``names``."""
        unknown = sorted(set(names) - set(self.switch_names))
        if unknown:
            raise ValueError(f"unknown switch(es) {unknown}; the manifest declares {list(self.switch_names)}")
        return replace(self, candidate_switches=tuple(names))

    def for_config(self, config: Mapping[str, Any] | None) -> Manifest:
        """This manifest as one check instance runs it: its arm's switches (``arm``: an ablation or
        rival arm) and a benchmark's own server arguments per side (``engine_args``,
        `fasttrack.kinds.benchmarks.plan`)."""
        config = config or {}
        manifest = self
        if config.get("arm") is not None:
            manifest = manifest.for_arm(config["arm"])
        args = {
            side: tuple(str(a) for a in words) for side, words in (config.get("engine_args") or {}).items() if words
        }
        if args:
            manifest = replace(manifest, side_args=args)
        return manifest

    def server_sides(self, config: Mapping[str, Any] | None) -> tuple[str, ...]:
        """The sides whose servers a check instance asks for: both, except that a manifest with
        rival arms has no all-on candidate (an instance of no arm runs stock only)."""
        if self.rival_arms and (config or {}).get("arm") is None:
            return ("baseline",)
        return ("baseline", "candidate")

    @property
    def data(self) -> dict[str, Any]:
        """The manifest as plain JSON-ready data (a fresh copy each call)."""
        return thaw(self.frozen_data)

    @property
    def id(self) -> str:
        return self.optimisation.id

    def line_of(self, path: Sequence[str | int]) -> int | None:
        return self.lines.get(tuple(path))

    def scope_points(self, dims: Sequence[str] | None = None) -> tuple[ScopePoint, ...]:
        """Scope points: the union over hardware entries of the product of all present
        dimensions, projected on ``dims`` (all dimensions when None) and de-duplicated."""
        return expand(hardware_setups(self.scope.hardware), self.scope.dimension_values(), dims)

    def scope_size(self) -> int:
        """len(scope_points()) without building them (every dimension's values are unique)."""
        size = len(hardware_setups(self.scope.hardware))
        for values in self.scope.dimension_values().values():
            size *= len(values)
        return size

    def hardware_setups(self) -> tuple[ScopePoint, ...]:
        """One scope point per hardware setup (accelerator, device_count, tensor_parallel)."""
        return self.scope_points(HARDWARE_DIMENSIONS)

    def deployments(self) -> tuple[ScopePoint, ...]:
        """One scope point per deployment: hardware setup x engine dimensions (the same as the
        hardware setups when the scope declares no engine dimension)."""
        return self.scope_points(self.scope.deployment_dimensions())

    def hardware_entry_for(self, point: ScopePoint) -> HardwareEntry | None:
        """The first hardware entry that contains this point's hardware dimensions."""
        for entry in self.scope.hardware:
            if point.get("accelerator", entry.accelerator) != entry.accelerator:
                continue
            if point.get("device_count", entry.device_counts[0]) not in entry.device_counts:
                continue
            if point.get("tensor_parallel", entry.tensor_parallel[0]) not in entry.tensor_parallel:
                continue
            return entry
        # a kernel suite's own, smaller hardware (kernel_tests[].device_count): fewer devices of an
        # entry's accelerator, with its architecture and driver requirements
        smaller = point.get("device_count")
        for entry in self.scope.hardware:
            if (
                point.get("accelerator") == entry.accelerator
                and smaller is not None
                and smaller < min(entry.device_counts)
            ):
                return entry
        return None

    def timeout_for(self, kind: str, explicit: float | None = None) -> float:
        if explicit is not None:
            return float(explicit)
        per_kind = self.timeouts.get("per_kind") or {}
        if kind in per_kind:
            return float(per_kind[kind])
        return float(self.timeouts.get("default_s", DEFAULT_TIMEOUT_S))

    def section(self, name: str) -> Any:
        """A top-level section as plain data (None when absent)."""
        value = self.frozen_data.get(name)
        return thaw(value) if value is not None else None

    def resolve_path(self, relative: str) -> Path:
        """A manifest path: relative to the repository root; 'checks/...' falls back to the
        checks shipped with fasttrack."""
        local = self.root / relative
        if local.exists() or not relative.startswith("checks/"):
            return local
        from fasttrack.resources import data_dir

        return data_dir("checks") / relative[len("checks/") :]

    def feature(self, name: str) -> FeatureProbe | None:
        for probe in self.features:
            if probe.name == name:
                return probe
        return None
