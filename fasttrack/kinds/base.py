"""What the gate knows of a check kind: the `Kind` protocol every kind package implements, and
the tables the rest of the gate derives from a registry of kinds (`fasttrack.kinds.registry`).

A kind is one package, ``fasttrack/kinds/<kind>/``, whose ``KIND`` satisfies `Kind`:

- ``plan(planner)``: its check instances (`fasttrack.plan.Planner` gives the manifest, the
  deployments and ``make``);
- ``runner``: the module whose ``run(instance, context)`` returns one `CheckOutcome` or a list
  (named, not imported: the engine imports it where it runs the check, often a worker process);
- ``measurements``: its typed measurements model, read from an outcome's plain JSON;
- ``check(outcome, subject)``: its pass rule as `fasttrack verify` and ``--resume`` re-derive it;
- ``report``: its section of the reports (None: the generic rows only), ``letter``: its letter in
  the report's where-it-works grid, ``audit``: listed in the report's audits table;
- ``exercises``: what its outcomes exercise at their scope point, for the report's coverage map:
  ``end_to_end`` (it drives the model or the target as a whole), ``kernel`` (kernel and unit
  tests under pytest) or ``static`` (it reads code or the manifest, and exercises no scope value);
- ``execution``: where and with what it runs (`Execution`), ``aliases``: short names for
  ``--only``/``--skip``, ``section``: the manifest section it reads.

Nothing registers itself: the registry is a plain mapping, and whoever needs kinds (the engine,
the planner, the reporters, verification, the schema generator) receives that mapping.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from fasttrack.evidence import CheckOutcome
    from fasttrack.kinds.context import RunContext
    from fasttrack.kinds.measurements import Measurements
    from fasttrack.kinds.reading import Subject
    from fasttrack.plan.instance import CheckInstance
    from fasttrack.plan.planner import Planner
    from fasttrack.report.sections import ReportSection

Isolation = Literal["inprocess", "subprocess"]
# What a kind's outcomes exercise at their scope point (the report's coverage map).
Exercises = Literal["end_to_end", "kernel", "static"]
# What every check worker imports before its check starts, besides its kind's runner.
RUNNER_LIBRARIES = ("numpy", "scipy.stats", "torch")


@dataclass(frozen=True)
class Execution:
    """Where and with what a kind's checks run.

    ``isolation``: ``subprocess`` for a runner that runs user code in its own process (an
    in-process target), in a worker process (`fasttrack.engine.worker`) the engine can kill on
    timeout or Ctrl-C; ``inprocess`` for runners that only start subprocesses themselves (pytest,
    git) through `RunContext.run_process`, which kills the whole process group on timeout, or
    that read manifest data only."""

    isolation: Isolation
    drives_target: bool  # needs the manifest's target: not runnable where the target cannot be opened
    modules_needed: tuple[str, ...] = ()  # Python modules it needs here (else not_run(dependency))
    commands_needed: tuple[str, ...] = ()  # programs it needs on PATH (else not_run(dependency))
    # May run beside other such checks with --jobs at CPU points: it runs the model on one core and
    # its outcome depends on outputs and distributions, not on time.
    shares_cores: bool = False
    # Instances equal in these scope dimensions share one expensive run (one pytest session), so a
    # shard never splits them; None: each instance on its own.
    group_dims: tuple[str, ...] | None = None
    # Runs the stock path only (no candidate): planned once, not once per rival arm.
    stock_only: bool = False
    # Times the target's servers: where servers are shared, it runs before the checks that load
    # them (a run's timing, not the servers' history after hundreds of long requests, decides).
    timed: bool = False


Rule = Callable[[Mapping[str, Any], "Subject"], list[str]]


class Runner(Protocol):
    """What the engine needs from a kind's runner module."""

    def run(self, instance: CheckInstance, context: RunContext) -> CheckOutcome | Sequence[CheckOutcome]: ...


class Kind(Protocol):
    """One check kind, as the gate sees it (module docstring)."""

    @property
    def name(self) -> str: ...
    @property
    def letter(self) -> str: ...
    @property
    def section(self) -> str | None: ...
    @property
    def aliases(self) -> tuple[str, ...]: ...
    @property
    def execution(self) -> Execution: ...
    @property
    def runner(self) -> str: ...
    @property
    def measurements(self) -> type[Measurements]: ...
    @property
    def report(self) -> ReportSection | None: ...
    @property
    def audit(self) -> bool: ...
    @property
    def exercises(self) -> Exercises: ...
    @property
    def sets_own_required(self) -> bool: ...

    def plan(self, planner: Planner) -> Iterable[CheckInstance]: ...

    def check(self, outcome: Mapping[str, Any], subject: Subject) -> list[str]: ...


@dataclass(frozen=True)
class KindSpec:
    """A `Kind` made of its parts: what each kind package's ``KIND`` is."""

    name: str
    letter: str  # its letter in the report's where-it-works grid
    section: str | None  # the manifest section it reads (None: the manifest as a whole)
    execution: Execution
    runner: str  # the module with run(instance, context)
    plan: Callable[[Planner], Iterable[CheckInstance]]
    check: Rule  # its pass rule, re-derived from an outcome's own measurements
    measurements: type[Measurements]
    exercises: Exercises  # end_to_end, kernel or static: the report's coverage map (module docstring)
    report: ReportSection | None = None
    aliases: tuple[str, ...] = ()  # short names accepted by --only/--skip
    audit: bool = False  # listed in the report's table of switch, audits and numerical checks
    sets_own_required: bool = False  # its runner decides each outcome's ``required`` (claims)


Kinds = Mapping[str, Kind]


# -------------------------------------------------------------------------------- derived tables


def canonical_kind(kinds: Kinds, name: str) -> str:
    """``scope`` -> ``scope_diff``; unknown names are returned unchanged (the caller rejects them)."""
    name = name.strip().lower().replace("-", "_")
    for kind in kinds.values():
        if name in kind.aliases:
            return kind.name
    return name


def load_runner(kinds: Kinds, kind: str) -> Runner | None:
    """The runner module of ``kind``, or None when this fasttrack has none."""
    found = kinds.get(kind)
    if found is None or find_spec(found.runner) is None:
        return None
    module = import_module(found.runner)
    return module if callable(getattr(module, "run", None)) else None


def preload_modules(kinds: Kinds) -> tuple[str, ...]:
    """What the zygote imports before its first fork: the libraries and the runner of every kind
    that runs in a worker process."""
    runners = (kind.runner for kind in kinds.values() if kind.execution.isolation == "subprocess")
    return tuple(dict.fromkeys((*RUNNER_LIBRARIES, *runners)))


def grid_letters(kinds: Kinds) -> dict[str, str]:
    """Kind -> its letter in the report's where-it-works grid, in registry order."""
    return {kind.name: kind.letter for kind in kinds.values()}


def audit_kinds(kinds: Kinds) -> tuple[str, ...]:
    """The kinds the report lists in its table of switch, audits and numerical checks."""
    return tuple(kind.name for kind in kinds.values() if kind.audit)


def starts_python(kinds: Kinds, kind: str) -> bool:
    """Whether a check of ``kind`` starts a Python process: a worker, or a pytest session."""
    found = kinds.get(kind)
    return found is not None and (
        found.execution.isolation == "subprocess" or "pytest" in found.execution.modules_needed
    )
