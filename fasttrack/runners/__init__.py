"""Check runners: one module per check kind, listed in a plain dict and imported lazily.

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

A runner module sets ``ISOLATION = "subprocess"`` when it runs user code in its own process
(an in-process target): the engine then runs it in a worker process (`fasttrack.engine_worker`)
that it can kill on timeout or Ctrl-C; this is the default for kinds that drive the target.
Runners that only start subprocesses themselves (pytest, git) say ``ISOLATION = "inprocess"``
and use `context.run_process`, which kills the whole process group on timeout.

A runner returning several outcomes for one instance gives the extra ones ids
``f"{instance.id}#{suffix}"`` so that --resume and `fasttrack merge` keep them together.
"""

from __future__ import annotations

import importlib
from importlib.util import find_spec
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, Sequence

if TYPE_CHECKING:
    from fasttrack.engine_context import RunContext
    from fasttrack.evidence import CheckOutcome

# check kind -> module implementing it. Several kinds may share a module.
RUNNERS: dict[str, str] = {
    "scope_diff": "fasttrack.runners.scope_diff",
    "switch": "fasttrack.runners.switch",
    "kernels": "fasttrack.runners.kernels",
    "stress": "fasttrack.runners.stress",
    "sanitizer": "fasttrack.runners.stress",
    "evals": "fasttrack.runners.evals",
    "divergence": "fasttrack.runners.divergence",
    "features": "fasttrack.runners.features",
    "speculative": "fasttrack.runners.speculative",
    "benchmarks": "fasttrack.runners.benchmarks",
    "claims": "fasttrack.runners.claims",
}

# Short names accepted by --only/--skip.
KIND_ALIASES: dict[str, str] = {
    "scope": "scope_diff",
    "diff": "scope_diff",
    "kernel": "kernels",
    "eval": "evals",
    "feature": "features",
    "benchmark": "benchmarks",
    "bench": "benchmarks",
    "claim": "claims",
    "compute_sanitizer": "sanitizer",
    "audit": "stress",
}


class Runner(Protocol):
    """What the engine needs from a runner module."""

    def run(self, instance: Any, context: "RunContext") -> "CheckOutcome | Sequence[CheckOutcome]": ...


def canonical_kind(name: str) -> str:
    """``scope`` -> ``scope_diff``; unknown names are returned unchanged (the caller rejects them)."""
    name = name.strip().lower().replace("-", "_")
    return KIND_ALIASES.get(name, name)


def runner_available(kind: str) -> bool:
    module = RUNNERS.get(kind)
    return module is not None and find_spec(module) is not None


def load_runner(kind: str) -> ModuleType | None:
    """The runner module of ``kind``, or None when this fasttrack has none (yet)."""
    if not runner_available(kind):
        return None
    module = importlib.import_module(RUNNERS[kind])
    return module if callable(getattr(module, "run", None)) else None


# Kinds that drive the system under test: unless their runner says otherwise, the engine runs
# them in a worker process it can kill (a hung or crashing target must not take the gate down).
TARGET_KINDS = frozenset({"switch", "evals", "divergence", "features", "speculative", "benchmarks", "claims"})


def isolation_of(module: ModuleType, kind: str | None = None) -> str:
    declared = getattr(module, "ISOLATION", None)
    if declared in ("inprocess", "subprocess"):
        return declared
    return "subprocess" if kind in TARGET_KINDS else "inprocess"
