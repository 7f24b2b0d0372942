"""Check runners: one module per check kind, and one table (`KINDS`) of what the planner, the
engine and the selection need to know about each kind. Modules are imported lazily.

A runner is a module with a function ``run(instance, context)`` returning one `CheckOutcome`
or a list of them (one per scope point it measured). Runners never print and never write
reports; they measure, store raw files as artifacts under ``context.artifact_dir`` and return
outcomes. `context.outcome(...)` fills the instance's id, kind, name, scope point and
``required`` flag, so a runner only says what happened::

    def run(instance, context):
        result = context.run_process([sys.executable, "-m", "pytest", ...], log_name="pytest.log")
        if result.timed_out:
            return context.outcome(instance, Status.ERRORED, reason_code="timeout", reason=...)
        return context.outcome(instance, Status.PASSED, measurements={...}, artifacts=[result.log])

``isolation`` says where the engine runs it: ``subprocess`` for a runner that runs user code in
its own process (an in-process target), in a worker process (`fasttrack.engine.worker`) the engine
can kill on timeout or Ctrl-C; ``inprocess`` for runners that only start subprocesses themselves
(pytest, git) through `context.run_process`, which kills the whole process group on timeout, or
that read manifest data only.

A runner returning several outcomes for one instance gives the extra ones ids
``f"{instance.id}#{suffix}"`` so that --resume and `fasttrack merge` keep them together.

Adding a check kind: one module here, one row in `KINDS`, one test file (CONTRIBUTING.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from types import ModuleType
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from fasttrack.evidence import CheckOutcome
    from fasttrack.instance import CheckInstance
    from fasttrack.runners.context import RunContext

Isolation = Literal["inprocess", "subprocess"]


@dataclass(frozen=True)
class KindSpec:
    """What the rest of the gate knows about one check kind."""

    module: str  # the runner module (several kinds may share one)
    isolation: Isolation  # where the engine runs it (see the module docstring)
    drives_target: bool  # needs the manifest's target: not runnable where the target cannot be opened
    modules_needed: tuple[str, ...] = ()  # Python modules it needs here (else not_run(dependency))
    commands_needed: tuple[str, ...] = ()  # programs it needs on PATH (else not_run(dependency))
    # May run beside other such checks with --jobs at CPU points: it runs the model on one core and
    # its outcome depends on outputs and distributions, not on time.
    shares_cores: bool = False
    # Instances equal in these scope dimensions share one expensive run (one pytest session), so a
    # shard never splits them; None: each instance on its own.
    group_dims: tuple[str, ...] | None = None
    aliases: tuple[str, ...] = ()  # short names accepted by --only/--skip


# Plan order: the order `fasttrack plan` lists kinds in and the engine runs them.
KINDS: dict[str, KindSpec] = {
    "scope_diff": KindSpec(
        "fasttrack.runners.scope_diff", "inprocess", False, commands_needed=("git",), aliases=("scope", "diff")
    ),
    "switch": KindSpec("fasttrack.runners.switch", "subprocess", True, shares_cores=True),
    "kernels": KindSpec(
        "fasttrack.runners.kernels",
        "inprocess",
        False,
        ("pytest",),
        group_dims=("accelerator", "device_count"),
        aliases=("kernel",),
    ),
    "stress": KindSpec("fasttrack.runners.stress", "inprocess", False, ("pytest",), aliases=("audit",)),
    "sanitizer": KindSpec(
        "fasttrack.runners.stress",
        "inprocess",
        False,
        ("pytest",),
        ("compute-sanitizer",),
        aliases=("compute_sanitizer",),
    ),
    "evals": KindSpec(
        "fasttrack.runners.evals.run", "subprocess", True, ("lm_eval",), shares_cores=True, aliases=("eval",)
    ),
    "divergence": KindSpec("fasttrack.runners.divergence", "subprocess", True, shares_cores=True),
    "features": KindSpec("fasttrack.runners.features", "subprocess", True, shares_cores=True, aliases=("feature",)),
    "speculative": KindSpec("fasttrack.runners.speculative", "subprocess", True, shares_cores=True),
    "stock_unchanged": KindSpec(
        "fasttrack.runners.stock_unchanged",
        "subprocess",
        True,
        commands_needed=("git",),
        shares_cores=True,
        aliases=("stock",),
    ),
    "benchmarks": KindSpec("fasttrack.runners.benchmarks", "subprocess", True, aliases=("benchmark", "bench")),
    "claims": KindSpec("fasttrack.runners.claims", "inprocess", False, aliases=("claim",)),
}


class Runner(Protocol):
    """What the engine needs from a runner module."""

    def run(self, instance: CheckInstance, context: RunContext) -> CheckOutcome | Sequence[CheckOutcome]: ...


# What every check worker imports before its check starts, besides its kind's runner.
RUNNER_LIBRARIES = ("numpy", "scipy.stats", "torch")


def preload_modules() -> tuple[str, ...]:
    """What the zygote imports before its first fork: the libraries and the runner of every kind
    that runs in a worker process."""
    runners = (spec.module for spec in KINDS.values() if spec.isolation == "subprocess")
    return tuple(dict.fromkeys((*RUNNER_LIBRARIES, *runners)))


def canonical_kind(name: str) -> str:
    """``scope`` -> ``scope_diff``; unknown names are returned unchanged (the caller rejects them)."""
    name = name.strip().lower().replace("-", "_")
    for kind, spec in KINDS.items():
        if name in spec.aliases:
            return kind
    return name


def load_runner(kind: str) -> ModuleType | None:
    """The runner module of ``kind``, or None when this fasttrack has none (yet)."""
    spec = KINDS.get(kind)
    if spec is None or find_spec(spec.module) is None:
        return None
    module = importlib.import_module(spec.module)
    return module if callable(getattr(module, "run", None)) else None
