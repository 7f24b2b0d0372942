"""Process groups: what is alive in one, and stopping one (SIGTERM, then SIGKILL after a grace
period). A check's subprocess, a worker and a target server each lead a group of their own, so
that stopping the group reaches whatever they started."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import IO, Protocol

KILL_GRACE_S = 2.0  # between SIGTERM and SIGKILL when stopping a check's process group
GONE_WAIT_S = 5.0  # after SIGKILL, how long to wait for a group to disappear


class LiveProcess(Protocol):
    """What a table of live processes and `kill_group` need of a process: a ``subprocess.Popen``,
    or a worker the zygote forked (`fasttrack.process.zygote.ForkedWorker`)."""

    pid: int
    returncode: int | None
    stdin: IO[bytes] | None

    def wait(self, timeout: float | None = None) -> int: ...


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (field 22 of /proc/PID/stat), or None without /proc."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()[19]


def group_members(pgid: int) -> list[int] | None:
    """Live (non-zombie) processes of group ``pgid``; None where /proc cannot tell."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def group_alive(pgid: int) -> bool:
    members = group_members(pgid)
    if members is not None:
        return bool(members)
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait_gone(pgid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def stop_group(pgid: int, grace_s: float) -> None:
    """SIGTERM the group, SIGKILL what is left after ``grace_s``, and wait until it is gone."""
    signal_group(pgid, signal.SIGTERM)
    if not wait_gone(pgid, grace_s):
        signal_group(pgid, signal.SIGKILL)
        wait_gone(pgid, GONE_WAIT_S)


def kill_group(proc: LiveProcess) -> None:
    """SIGTERM the process group ``proc`` leads, then SIGKILL what is left after a grace period."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 5.0)):
        signal_group(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            # The leader is gone; make sure no child of it survives either.
            signal_group(proc.pid, signal.SIGKILL)
            return
        except subprocess.TimeoutExpired:
            continue


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
