"""`--jobs N`: which instances share the machine, and the order they start in."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fasttrack.cli.options import parse_jobs
from fasttrack.engine.jobs import next_to_start, servers_first, shares_cores
from fasttrack.errors import UsageError
from fasttrack.kinds.registry import KINDS


def inst(kind: str, name: str = "x", accelerator: str = "cpu") -> SimpleNamespace:
    return SimpleNamespace(kind=kind, id=f"{kind}/{name}", scope_point={"accelerator": accelerator})


def test_checks_of_the_target_share_and_timing_or_shared_state_checks_do_not():
    assert all(shares_cores(inst(k), KINDS) for k in ("switch", "evals", "divergence", "features", "speculative"))
    assert not any(
        shares_cores(inst(k), KINDS) for k in ("benchmarks", "stress", "kernels", "sanitizer", "scope_diff", "claims")
    )
    assert not shares_cores(inst("features", accelerator="NVIDIA H200"), KINDS)  # a target holds the GPU
    assert shares_cores(SimpleNamespace(kind="switch", id="switch/x", scope_point=None), KINDS)


def test_plan_order_when_idle_and_up_to_n_shareable_at_once():
    pending = [inst("features", "a"), inst("features", "b"), inst("evals", "c")]
    assert next_to_start(pending, [], 2, KINDS) == 0
    assert next_to_start(pending[1:], [pending[0]], 2, KINDS) == 0
    assert next_to_start(pending[2:], pending[:2], 2, KINDS) is None  # two running: wait


def test_a_check_that_runs_alone_waits_while_shareable_ones_overtake_it():
    pending = [inst("benchmarks", "b1"), inst("features", "f1"), inst("stress", "s")]
    running = [inst("evals", "e")]
    assert next_to_start(pending, running, 2, KINDS) == 1  # the benchmark waits, the probe starts
    assert next_to_start([inst("benchmarks")], running, 2, KINDS) is None
    assert next_to_start([inst("benchmarks")], [], 2, KINDS) == 0  # alone once the machine is free


def test_nothing_starts_beside_a_check_that_runs_alone():
    assert next_to_start([inst("features")], [inst("kernels")], 4, KINDS) is None
    assert next_to_start([], [], 2, KINDS) is None


def test_with_shared_servers_the_timed_checks_start_before_any_check_loads_the_servers():
    """Free checks first (while the servers start), then the benchmarks, then the rest in plan
    order: the example's pairs decided in 7 on fresh servers, 22-29 after the evals' load."""
    planned = [
        inst("scope_diff", "d"),
        inst("switch", "s"),
        inst("kernels", "k"),
        inst("evals", "e"),
        inst("features", "f"),
        inst("benchmarks", "b1"),
        inst("speculative", "p"),
        inst("benchmarks", "b2"),
    ]
    order = [i.id for i in servers_first(planned, KINDS)]  # type: ignore[arg-type]
    assert order == [
        "scope_diff/d",
        "kernels/k",
        "benchmarks/b1",
        "benchmarks/b2",
        "switch/s",
        "evals/e",
        "features/f",
        "speculative/p",
    ]
    assert [k for k, kind in KINDS.items() if kind.execution.timed] == ["benchmarks"]


def test_parse_jobs():
    assert parse_jobs("1") == 1 and parse_jobs(" 3 ") == 3 and parse_jobs("auto") >= 1
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(UsageError, match="--jobs"):
            parse_jobs(bad)


def test_a_process_started_after_the_stop_is_stopped_at_once(tmp_path):
    """Ctrl-C with --jobs: a check's thread may start its process just after the engine stopped
    the live ones; it must not run on (the run would wait for it)."""
    import sys

    from fasttrack.process.logged import Processes

    processes = Processes()
    processes.stop_all()
    result = processes.run_logged(
        [sys.executable, "-c", "import time; time.sleep(3600)"],
        tmp_path / "late.log",
        cwd=None,
        env=None,
        timeout_s=900,  # a guard: without the stop this would hang, not pass
        evidence_dir=tmp_path,
    )
    assert result.signal is not None and not result.timed_out
    assert processes.live() == []
