"""Workers forked from the pre-imported zygote behave as started ones: session, descriptors,
environment, exit status, group kill, lifeline; and anything it cannot do falls back to a start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from fasttrack.process.groups import kill_group
from fasttrack.process.logged import Processes
from fasttrack.process.zygote import DISABLE_ENV, Zygote

READY_S = 120.0  # the zygote imports torch and scipy first; a busy host may take a while


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    z = Zygote()
    assert z.ready(READY_S), "the zygote never became ready to fork"
    yield z
    z.close()


def module(tmp_path: Path, name: str, body: str) -> Path:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body), encoding="utf-8")
    return tmp_path


def fork(z: Zygote, tmp_path: Path, name: str, *args: str, env: dict[str, str] | None = None):
    log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - the worker holds its own copy
    try:
        proc = z.fork([sys.executable, "-m", name, *args], tmp_path, {**os.environ, **(env or {})}, log.fileno())
    finally:
        log.close()
    assert proc is not None
    return proc


def test_a_forked_worker_gets_the_commands_cwd_env_argv_session_and_log(zygote, tmp_path):
    module(
        tmp_path,
        "report_self",
        """
        import json, os, sys
        print(json.dumps({
            "name": __name__, "argv": sys.argv[1:], "cwd": os.getcwd(), "path0": sys.path[0],
            "x": os.environ.get("FT_ZYGOTE_X"), "leader": os.getsid(0) == os.getpid(),
            "stdin_is_pipe": not os.isatty(0),
        }))
        sys.exit(3)
        """,
    )
    proc = fork(zygote, tmp_path, "report_self", "a", "b", env={"FT_ZYGOTE_X": "42"})
    assert proc.wait(timeout=60) == 3
    seen = json.loads((tmp_path / "report_self.log").read_text(encoding="utf-8"))
    assert seen["name"] == "__main__" and seen["argv"] == ["a", "b"]
    assert Path(seen["cwd"]) == tmp_path and Path(seen["path0"]) == tmp_path
    assert seen["x"] == "42" and seen["leader"] and seen["stdin_is_pipe"]


def test_killing_the_group_stops_a_forked_worker_and_its_children(zygote, tmp_path):
    module(
        tmp_path,
        "sleeper",
        """
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        print(child.pid, flush=True)
        time.sleep(600)
        """,
    )
    proc = fork(zygote, tmp_path, "sleeper")
    log = tmp_path / "sleeper.log"
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.2)
    # the grandchild's pid in the log is the readiness signal
    import time

    deadline = time.monotonic() + 120
    while not log.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(log.read_text().split()[0])
    kill_group(proc)
    assert proc.returncode == -signal.SIGTERM
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the worker's child outlived the kill of its group")


def test_the_lifeline_tells_a_forked_worker_that_the_engine_side_is_gone(zygote, tmp_path):
    module(tmp_path, "waits_for_eof", "import os, sys\nwhile os.read(0, 1024):\n    pass\nsys.exit(7)\n")
    proc = fork(zygote, tmp_path, "waits_for_eof")
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.2)
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=60) == 7


def test_a_crash_is_reported_as_the_signal_that_ended_it(zygote, tmp_path):
    module(tmp_path, "aborts", "import os\nos.abort()\n")
    proc = fork(zygote, tmp_path, "aborts")
    assert proc.wait(timeout=60) == -signal.SIGABRT


@pytest.fixture
def forking(zygote):
    return zygote


def logged(tmp_path: Path, command: list[str], timeout_s: float, lifeline: bool, forker: Zygote | None = None):
    return Processes(forker).run_logged(
        command,
        tmp_path / f"{command[-1]}.log",
        cwd=tmp_path,
        env=None,
        timeout_s=timeout_s,
        evidence_dir=tmp_path,
        lifeline=lifeline,
    )


@pytest.mark.parametrize("lifeline", [True, False])
def test_run_logged_through_the_zygote_records_as_a_start_would(forking, tmp_path, lifeline):
    """A worker (lifeline pipe on stdin) or a pytest session (stdin /dev/null): forked by the
    zygote (its parent), logged, its exit code and a timeout recorded as for a started process."""
    body = "import os, stat\nprint('parent', os.getppid(), 'stdin', stat.S_ISFIFO(os.fstat(0).st_mode))\n"
    module(tmp_path, "says_hi", body)
    result = logged(tmp_path, [sys.executable, "-m", "says_hi"], 120, lifeline, forking)
    assert result.returncode == 0 and not result.timed_out
    assert f"parent {forking._proc.pid} stdin {lifeline}" in result.tail()
    module(tmp_path, "hangs", "import time\ntime.sleep(600)\n")
    hung = logged(tmp_path, [sys.executable, "-m", "hangs"], 1.0, lifeline, forking)
    assert hung.timed_out and hung.signal == signal.SIGTERM


def test_what_it_cannot_fork_is_left_to_a_start(forking, tmp_path, monkeypatch):
    assert forking.fork(["/bin/true"], tmp_path, dict(os.environ), 1) is None  # not python -m
    other_path = {**os.environ, "PYTHONPATH": str(tmp_path)}  # read only when an interpreter starts
    assert forking.fork([sys.executable, "-m", "json.tool", "--help"], tmp_path, other_path, 1) is None
    result = logged(tmp_path, ["sh", "-c", "echo started afresh"], 60, True, forking)
    assert result.returncode == 0 and "started afresh" in result.tail()
    monkeypatch.setenv(DISABLE_ENV, "1")
    assert not Zygote.wanted()


def test_a_gone_zygote_forks_nothing_and_its_running_workers_still_end(tmp_path):
    z = Zygote()
    assert z.ready(READY_S)
    module(tmp_path, "waits_for_eof2", "import os\nwhile os.read(0, 1024):\n    pass\n")
    proc = fork(z, tmp_path, "waits_for_eof2")
    z._proc.kill()
    z._proc.wait()
    with z._changed:  # the listener thread sees the socket close when it next runs
        assert z._changed.wait_for(lambda: not z._alive, READY_S)
    assert not z.ready(0)
    assert z.fork([sys.executable, "-m", "waits_for_eof2"], tmp_path, dict(os.environ), 1) is None
    assert proc.stdin is not None
    proc.stdin.close()  # the worker ends; with no zygote to report its status it reads as a crash
    assert proc.wait(timeout=60) == -signal.SIGKILL
    z.close()
