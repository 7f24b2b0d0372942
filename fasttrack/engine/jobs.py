"""Which check instances may share the machine, and in what order a ``--jobs N`` run starts them.

A check of the target whose kind ``shares_cores`` (its ``Kind.execution``) at a CPU point runs the model
in its own worker process pinned to one intra-op thread (fasttrack.process.cpu), so on an
N-core machine N of them can run side by side without changing what they measure: their outcomes
depend on outputs and distributions, not on time. At an accelerator's points each target holds
the device, so they run alone. Everything else runs alone: benchmarks and stress audits measure
time or inject delays (a neighbour would be noise), kernel tests share one pytest session across
instances, compute-sanitizer multiplies memory and time, and the in-process checks (scope_diff,
claims) are instant anyway.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fasttrack.kinds.base import Kinds
    from fasttrack.plan.instance import CheckInstance


def shares_cores(instance: CheckInstance, kinds: Kinds) -> bool:
    """A check of the target at a CPU point: on an accelerator each target holds the device's
    memory and time (a second model beside it could run out of memory), so those run alone."""
    point = instance.scope_point
    accelerator = point.get("accelerator", "cpu") if point is not None else "cpu"
    kind = kinds.get(instance.kind)
    return kind is not None and kind.execution.shares_cores and str(accelerator).lower() == "cpu"


def next_to_start(
    pending: Sequence[CheckInstance], running: Iterable[CheckInstance], jobs: int, kinds: Kinds
) -> int | None:
    """Index in ``pending`` of the instance to start now, or None to wait for one to finish.

    Plan order, except that while checks that share the machine are running, an instance that
    must run alone waits and the next one that can share starts instead."""
    running = list(running)
    if not pending or len(running) >= jobs:
        return None
    if not running:
        return 0
    if any(not shares_cores(r, kinds) for r in running):
        return None
    return next((i for i, instance in enumerate(pending) if shares_cores(instance, kinds)), None)


def servers_first(selected: Sequence[CheckInstance], kinds: Kinds) -> list[CheckInstance]:
    """The start order of a run whose target servers start in the background: checks that need
    no server (scope_diff, kernel tests, audits) first, while the servers come up (on the 2-core
    host the example's kernel tests took 12 s at the end of the run, alone); then the timed ones
    (``Execution.timed``), on servers nothing has loaded yet; plan order otherwise.

    Why timed first: the same two vLLM servers timed after the evals' long requests timed
    differently from fresh ones (median stock/candidate TPOT ratio at concurrency 1 over 10
    pairs 1.16 fresh, 1.06 after 64 long requests per side; sd(log ratio) 0.06 against 0.11), so
    the "not slower than stock" rule needed 22-29 pairs at the end of the main job instead of 7."""

    def turn(instance: CheckInstance) -> int:
        execution = kinds[instance.kind].execution
        return 0 if not execution.drives_target else 1 if execution.timed else 2

    return sorted(selected, key=turn)  # stable: plan order within each turn


def default_jobs() -> int:
    """``--jobs auto``: one per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
