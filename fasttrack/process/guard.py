"""No target server outlives its run, whatever ends the process that started it.

A server (``vllm serve ...``) runs in its own process group, so that stopping it reaches its
workers too; but then it is out of reach of the engine, which kills a check's worker by *its*
process group on a timeout or Ctrl-C: a server started by the worker would live on with parent
PID 1. Two mechanisms close that gap; each alone leaves a hole:

1. A guard process owns the server's group: ``python -m fasttrack.process.guard`` is started as
   the group's leader, starts the server as its child in the same group, and holds a pipe whose
   other end only the worker has. When the worker dies, by any signal including SIGKILL, the
   kernel closes that end; the guard reads end-of-file and stops the group (SIGTERM, SIGKILL
   after the grace period). This works even when nothing else of fasttrack survives (the engine
   killed too: the worker watches its own pipe from the engine the same way,
   ``fasttrack.engine.worker``), and needs no cooperation from the server.
2. A registry the engine reads: before starting the server the guard writes a small file (its
   group id and start time) into a folder the engine gave the worker
   (``FASTTRACK_SERVER_REGISTRY``). After a worker ends, however it ended, the engine stops every
   group still registered there, waits until it is gone and names it in the outcome (``reap``).
   So when `fasttrack check` returns, no server of the run is left, and nothing depends on
   timing (the guard alone may still be in its grace period). The start time guards against a
   recycled group id.

3. The guard is a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``, Linux): a server's child
   that leaves the group with a session of its own (``setsid``, as Ray-style daemons do) is no
   longer reached by a group signal, and when its parent exits it is re-parented to the guard
   instead of PID 1. When the server ends, or is stopped, the guard kills every descendant it
   still has (found through the parent links in /proc) and writes their commands into the
   registry (``leftover-PGID.json``); ``reap`` names them in the check's outcome.

Why not ``prctl(PR_SET_PDEATHSIG)``: it reaches only the direct child (not the server's own
workers), fires when the *thread* that forked exits (the worker forks from a thread pool), and is
Linux-only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from fasttrack.process.groups import group_alive, signal_group, start_time, stop_group
from fasttrack.process.reaper import become_subreaper, kill_descendants

REGISTRY_ENV = "FASTTRACK_SERVER_REGISTRY"
# CPUs (comma-separated ids) the guard pins itself to before it starts the server, which inherits
# the affinity with every process it starts (`ServerSpec.cpus`); not passed on to the server.
CPUS_ENV = "FASTTRACK_SERVER_CPUS"


# ------------------------------------------------------------------------------ the registry


def entry_path(registry: Path, pgid: int) -> Path:
    return Path(registry) / f"server-{pgid}.json"


def register(registry: Path, pgid: int, command: list[str]) -> None:
    path = entry_path(registry, pgid)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pgid": pgid, "start": start_time(pgid), "command": command[:8]}))
    tmp.replace(path)


def reap(registry: Path | None, grace_s: float = 2.0) -> list[str]:
    """Stop every server group still registered in ``registry`` (the worker that started them
    is gone). Returns one line per server its check left running, and one per set of processes
    a server left behind in sessions of their own (which its guard killed)."""
    if registry is None or not Path(registry).is_dir():
        return []
    stopped = leftovers(Path(registry))
    for path in sorted(Path(registry).glob("server-*.json")):
        try:
            entry = json.loads(path.read_text())
            pgid = int(entry["pgid"])
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)
            continue
        recorded, now = entry.get("start"), start_time(pgid)
        recycled = recorded is not None and now is not None and now != recorded
        if not recycled and group_alive(pgid):
            stop_group(pgid, grace_s)
        # An entry left here is a server its check did not stop: stopped now, or already by its
        # guard when the check's worker died (the guard leaves the entry for this report).
        stopped.append(f"stopped the server left running by the check ({' '.join(entry.get('command') or [])})")
        path.unlink(missing_ok=True)
    return stopped


def leftovers(registry: Path) -> list[str]:
    """The lines for the processes guards killed because servers left them behind."""
    lines = []
    for path in sorted(registry.glob("leftover-*.json")):
        try:
            commands = [str(c) for c in json.loads(path.read_text())]
        except (OSError, ValueError, TypeError):
            commands = ["unreadable record"]
        if commands:
            lines.append(
                f"killed {len(commands)} process(es) the target server left running in a session of their own: "
                + "; ".join(c[:120] for c in commands[:5])
            )
        path.unlink(missing_ok=True)
    return lines


# ------------------------------------------------------------------------------ the guard


def guard_command(command: list[str], registry: str | None, grace_s: float) -> list[str]:
    """How ManagedServer starts ``command`` under a guard (stdin must be a pipe it holds)."""
    return [sys.executable, "-m", "fasttrack.process.guard", registry or "", str(grace_s), "--", *command]


def _outlive(signum: int, frame: object) -> None:
    """The guard's answer to SIGTERM / SIGINT sent to its group: none (see main)."""


def main(argv: list[str]) -> int:
    registry, grace_s, command = argv[0], float(argv[1]), argv[3:]
    pgid = os.getpgrp()
    # stop() signals the whole group; the server answers it, the guard outlives it to clean up.
    # A handler that does nothing, not SIG_IGN: an ignored signal stays ignored across exec, so the
    # server would ignore SIGTERM too and every stop would wait out the grace period and SIGKILL
    # it (no graceful shutdown); a caught one is reset to the default in the server.
    signal.signal(signal.SIGTERM, _outlive)
    signal.signal(signal.SIGINT, _outlive)
    become_subreaper()
    if registry:
        register(Path(registry), pgid, command)
    try:
        cpus = os.environ.pop(CPUS_ENV, "")
        if cpus:  # inherited by the server and every process it starts
            os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
        server = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    except OSError as exc:
        print(f"fasttrack: cannot start server command {command!r}: {exc}", flush=True)
        return 127
    orphaned = threading.Event()

    def watch() -> None:
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        orphaned.set()  # the process that started the server is gone: stop the group
        signal_group(pgid, signal.SIGTERM)
        try:
            server.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        # The registry entry stays: the engine's reap reports the server its check left running.
        kill_descendants(registry, pgid, grace_s)
        signal_group(pgid, signal.SIGKILL)  # this guard included: its work is done

    threading.Thread(target=watch, daemon=True).start()
    code = server.wait()
    signal_group(pgid, signal.SIGTERM)  # the server's own children, if it left any (this guard ignores it)
    kill_descendants(registry, pgid, grace_s)  # and those that left the group with a session of their own
    if registry and not orphaned.is_set():
        entry_path(Path(registry), pgid).unlink(missing_ok=True)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
