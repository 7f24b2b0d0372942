"""#35 row 9: a server's child that starts its own session (as Ray-style daemons do) does not
outlive the server: the guard, a child subreaper, kills it and the engine's reap names it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fasttrack.process.guard import guard_command, reap
from support.waiting import WAIT_S

SERVER = """
import subprocess, sys
daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # ray-daemon"], start_new_session=True)
open(sys.argv[1], "w").write(str(daemon.pid))
"""


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_daemon_in_its_own_session_is_killed_and_named(tmp_path):
    registry, pidfile = tmp_path / "servers", tmp_path / "daemon.pid"
    registry.mkdir()
    command = guard_command([sys.executable, "-c", SERVER, str(pidfile)], str(registry), 2.0)
    guard = subprocess.Popen(command, stdin=subprocess.PIPE, start_new_session=True)
    try:
        assert guard.wait(timeout=WAIT_S) == 0  # the server exited; the guard cleaned up after it
    finally:
        assert guard.stdin is not None
        guard.stdin.close()
    daemon = int(pidfile.read_text())
    assert not alive(daemon), "the daemon outlived its server"
    lines = reap(registry)
    assert (
        len(lines) == 1 and "killed 1 process(es) the target server left running in a session of their own" in lines[0]
    )
    assert f"pid {daemon}:" in lines[0] and "ray-daemon" in lines[0]
