"""The guard as a child subreaper: every descendant of a target server stays findable, even one
that left the server's process group with a session of its own, and is killed with the server.

``become_subreaper`` sets ``PR_SET_CHILD_SUBREAPER`` (Linux 3.4+; elsewhere nothing happens and
only the descendants still linked to the guard through living parents are found).
``kill_descendants`` walks the parent links in /proc from the guard's pid, sends SIGTERM, then
SIGKILL after the grace period to any still alive, reaps them, and records their commands in the
registry for the engine's report (``fasttrack.process.guard.leftovers``)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> dict[int, str]:
    """Every live process below ``root`` (pid -> command line), through /proc's parent links."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            parents[int(entry)] = int(fields[1])
    found, frontier = {}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = _command(pid)
                frontier.append(pid)
    return found


def kill_descendants(registry: str | None, pgid: int, grace_s: float) -> list[str]:
    """Kill what is left below this process (the guard) outside its group ``pgid`` (the group
    has its own stop); record it under ``registry``."""
    left = {pid: cmd for pid, cmd in descendants(os.getpid()).items() if _group(pid) != pgid}
    if not left:
        return []
    _signal(left, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(pid) for pid in left):
        _reap_children()
        time.sleep(0.05)  # polling the processes' end, bounded by the grace period
    _signal([pid for pid in left if _alive(pid)], signal.SIGKILL)
    _reap_children()
    commands = list(left.values())
    if registry:
        path = Path(registry) / f"leftover-{pgid}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(commands))
        tmp.replace(path)
    return commands


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return f"pid {pid}"
    return f"pid {pid}: " + raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:200]


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _reap_children() -> None:
    """Collect the exit status of re-parented children (a subreaper's zombies)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
