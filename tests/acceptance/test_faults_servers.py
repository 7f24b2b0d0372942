"""Row 4 of #20: no target server outlives its run, whatever stops it: Ctrl-C (--jobs 1 and 2), a
check timeout, a killed worker, a killed engine. The fixture's servers never answer a request
(``server_hang``) and write a readiness file once they listen; the tests wait on those files and
on process exits, never on fixed sleeps, and then find no process of the run and no listener on
its ports."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from support.interrupts import default_sigint
from support.projects import materialise
from support.waiting import WAIT_S, wait_for


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def processes_under(folder: Path) -> list[str]:
    """Live processes whose command line or working directory is inside ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not alive(int(entry.name)):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if str(folder) in cmdline or cwd.startswith(str(folder)):
            found.append(f"{entry.name}: {cmdline.strip()}")
    return found


class Run:
    def __init__(self, tmp_path: Path, *args: str):
        self.project = materialise(tmp_path / "p", "server_hang")
        self.ready = tmp_path / "ready"
        self.ready.mkdir()
        self.out = tmp_path / "out"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fasttrack", "check", "fasttrack.yaml", "--out", str(self.out), "--no-reports"]
            + ["--only", "switch", *args],
            cwd=self.project,
            env={**os.environ, "TOY_READY_DIR": str(self.ready)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=default_sigint,  # a Ctrl-C must reach it (support.interrupts)
            text=True,
        )

    def servers(self) -> list[dict[str, int]]:
        return [json.loads(p.read_text()) for p in sorted(self.ready.glob("*.json"))]

    def wait_servers(self, n: int) -> list[dict[str, int]]:
        return wait_for(lambda: len(self.servers()) >= n and self.servers(), f"{n} server(s) listening")  # type: ignore[return-value]

    def finish(self) -> tuple[int, str, dict]:
        output, _ = self.proc.communicate(timeout=WAIT_S)
        evidence = json.loads((self.out / "evidence.json").read_text())
        return self.proc.returncode, output, evidence

    def assert_nothing_left(self) -> None:
        servers = self.servers()
        assert servers, "no server ever started"
        for s in servers:
            assert not alive(s["pid"]), f"server {s} outlived the run"
            assert not listening(s["port"]), f"something still listens on port {s['port']}"
        assert processes_under(self.project) == []


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_stops_every_server(tmp_path, jobs):
    run = Run(tmp_path, "--jobs", jobs)
    run.wait_servers(int(jobs))  # with --jobs 2 both switch instances run side by side
    run.proc.send_signal(signal.SIGINT)
    code, output, evidence = run.finish()
    assert code == 130, output
    assert evidence["run"]["state"] == "interrupted"
    assert {c["reason_code"] for c in evidence["checks"] if c["kind"] == "switch"} == {"interrupted"}
    assert "Traceback" not in output
    run.assert_nothing_left()


@pytest.mark.slow
def test_a_check_timeout_stops_its_server(tmp_path):
    run = Run(tmp_path, "--timeout-scale", "0.1")  # 6 s per switch instance; the servers never answer
    code, output, evidence = run.finish()
    switch = [c for c in evidence["checks"] if c["kind"] == "switch"]
    assert code == 3 and [(c["status"], c["reason_code"]) for c in switch] == [("errored", "timeout")] * 2, output
    assert all("target server" in c["reason"] for c in switch), [c["reason"] for c in switch]
    run.assert_nothing_left()


def ancestors(pid: int) -> list[int]:
    """``pid``'s parent, grandparent, ... up to the init process; empty once it has exited."""
    chain = []
    try:
        while pid > 1:
            pid = parent_of(pid)
            chain.append(pid)
    except OSError:
        return []
    return chain


def live_worker(run: Run, killed: set[int]) -> int | None:
    """The check worker of a listening server (its guard's parent), one not killed yet. Both sides
    of an instance start at once, so the n-th ready server may belong to any instance: workers
    are told apart by pid, never by the order their servers came up in."""
    for server in run.servers():
        chain = ancestors(server["pid"])  # guard, worker, ..., the engine, ...
        if run.proc.pid in chain[2:] and chain[1] not in killed:
            return chain[1]
    return None


@pytest.mark.slow
def test_a_killed_worker_leaves_no_server(tmp_path):
    run = Run(tmp_path)
    killed: set[int] = set()
    for n in (1, 2):  # one switch instance after the other: kill each one's worker
        worker = wait_for(lambda: live_worker(run, killed), f"a server of switch instance {n} listening")
        os.kill(worker, signal.SIGKILL)
        killed.add(worker)
    code, output, evidence = run.finish()
    switch = [c for c in evidence["checks"] if c["kind"] == "switch"]
    assert code == 3 and [(c["status"], c["reason_code"]) for c in switch] == [("errored", "crashed")] * 2, output
    assert all("SIGKILL" in c["reason"] and "target server" in c["reason"] for c in switch)
    run.assert_nothing_left()


@pytest.mark.slow
def test_a_killed_engine_leaves_no_server(tmp_path):
    """Nothing of fasttrack is left to clean up: the lifelines (worker stdin, guard stdin) do it."""
    run = Run(tmp_path)
    (server,) = run.wait_servers(1)
    run.proc.kill()
    run.proc.communicate(timeout=WAIT_S)
    wait_for(lambda: not alive(server["pid"]), "the server to be stopped by its guard")
    wait_for(lambda: not processes_under(run.project), "every process of the run to end")
    assert not listening(server["port"])
