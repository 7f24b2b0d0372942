"""Check workers forked from a pre-imported parent (the zygote) instead of started afresh.

A fresh worker (``python -m fasttrack.engine.worker``) spends ~2 CPU-s importing torch, numpy,
scipy and fasttrack's runners before its check does anything, a kernel-test session (``python -m
pytest``) as much before it collects; the example's main job starts ~30 of them on 2 cores. The
zygote (``python -m fasttrack.process.zygote FD MODULE...``) imports those once per run (the
modules its starter names: the engine derives them from the kinds registry) and forks one worker
per check. A forked worker is what `fasttrack.process.logged.Processes.run_logged` would have
started: its own session (the engine kills its process group on timeout or Ctrl-C), the
engine's lifeline pipe (or /dev/null) as stdin, its log as stdout and stderr, the command's environment, working
directory, ``sys.path[0]`` and ``sys.argv``, fresh random seeds, the default SIGINT handler, and the
module run as ``__main__`` (``runpy``, as ``-m`` does). Requests and the two file descriptors travel
over a Unix socket (``socket.send_fds``); the zygote reaps its children and reports each exit status.

It never changes an outcome, only what starting costs: where it cannot help (not started yet, a
command that is not ``python -m``, an environment that differs in what only a starting
interpreter or library reads, such as ``PYTHONPATH`` or ``OMP_NUM_THREADS``, threads running
after its imports, which would make forking unsafe, or the zygote gone), the worker starts
afresh as before. ``FASTTRACK_NO_ZYGOTE=1`` turns it
off. The zygote imports no CUDA state: torch initialises a device only when a worker first uses it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

DISABLE_ENV = "FASTTRACK_NO_ZYGOTE"
# Variables read when the interpreter, torch or a native library starts, not later: a command
# whose environment differs from the zygote's in any of them is started afresh instead.
STARTUP_ENV_PREFIXES = ("PYTHON", "OMP_", "MKL_", "OPENBLAS_", "KMP_", "GOMP_", "TORCH_", "LD_", "MALLOC_")
_MESSAGE = 65536
_REAP_EVERY_S = 0.05


# -------------------------------------------------------------------------------- the zygote


@dataclass(frozen=True)
class _Request:
    module: str
    args: list[str]
    cwd: str
    env: dict[str, str]
    token: int


def _send(sock: socket.socket, message: Mapping[str, Any]) -> None:
    sock.sendall(json.dumps(message).encode())


def _preload(modules: Sequence[str]) -> None:
    for name in modules:
        with contextlib.suppress(
            Exception
        ):  # an optional dependency missing here: the worker meets it as it would have
            importlib.import_module(name)


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)
        with contextlib.suppress(OSError):
            _send(sock, {"exited": pid, "returncode": os.waitstatus_to_exitcode(status)})


def serve(sock: socket.socket, preload: Sequence[str] = ()) -> tuple[_Request, list[int]] | None:
    """The zygote's loop: import ``preload``, then fork a worker per request until the engine's end
    closes. Returns None in the zygote, and (request, descriptors) in each forked child, which then
    becomes the worker."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the engine; it closes the socket
    _preload(preload)
    forkable = threading.active_count() == 1
    _send(sock, {"ready": forkable})
    if not forkable:
        return None
    children: set[int] = set()
    while True:
        readable, _, _ = select.select([sock], [], [], _REAP_EVERY_S if children else None)
        _reap(sock, children)
        if not readable:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, _MESSAGE, 2)
        except OSError:
            return None
        if not data:
            return None  # the engine is done (or gone): the workers watch their own lifelines
        request = _Request(**json.loads(data))
        # The child is in its own session before the engine learns its pid: a kill of its group
        # (timeout, Ctrl-C) must never miss it.
        in_session, announce = os.pipe()
        pid = os.fork()
        if pid == 0:
            sock.close()
            os.close(in_session)
            os.setsid()
            os.write(announce, b"1")
            os.close(announce)
            return request, fds
        os.close(announce)
        os.read(in_session, 1)
        os.close(in_session)
        for fd in fds:
            os.close(fd)
        children.add(pid)
        _send(sock, {"started": request.token, "pid": pid})


def become_worker(request: _Request, fds: Sequence[int]) -> None:
    """In the forked child: take on the worker's session, descriptors, environment and main module."""
    import runpy

    # [lifeline, log], or [log] for a command whose stdin is /dev/null
    stdin = fds[0] if len(fds) == 2 else os.open(os.devnull, os.O_RDONLY)
    log = fds[-1]
    os.dup2(stdin, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(stdin)
    os.close(log)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    sys.path[0] = os.path.abspath(request.cwd)  # what ``python -m`` puts first
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()  # a fresh interpreter seeds numpy's global generator from the OS
    sys.argv = [request.module, *request.args]
    runpy.run_module(request.module, run_name="__main__", alter_sys=True)


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    child = serve(sock, argv[1:])
    if child is None:
        return 0
    become_worker(*child)  # the worker's own sys.exit ends this process with its code
    return 0


# -------------------------------------------------------------------------------- the engine's end


class ForkedWorker:
    """A worker forked by the zygote, as `Processes.run_logged` handles a ``subprocess.Popen``: ``pid`` (its
    process group), ``stdin`` (the lifeline's write end), ``wait`` and ``returncode``."""

    def __init__(self, zygote: Zygote, pid: int, args: Sequence[str], lifeline: IO[bytes] | None):
        self.pid = pid
        self.args = list(args)
        self.stdin: IO[bytes] | None = lifeline
        self.returncode: int | None = None
        self._zygote = zygote

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._zygote.exit_status(self.pid, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return self.returncode


class Zygote:
    """Starts the zygote, forks workers through it, learns their exit statuses, stops it: a
    `fasttrack.process.logged.Forker`. ``preload``: the modules it imports before its first fork
    (what the workers it forks would import first)."""

    def __init__(self, preload: Sequence[str] = ()) -> None:
        self._startup_env = _startup_env(os.environ)
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "fasttrack.process.zygote", str(theirs.fileno()), *preload],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        theirs.close()
        self._changed = threading.Condition()
        self._ready: bool | None = None  # None: still importing
        self._alive = True
        self._started: dict[int, int] = {}  # token -> pid
        self._exited: dict[int, int] = {}  # pid -> exit code (negative: the signal that ended it)
        self._send_lock = threading.Lock()
        self._token = 0
        threading.Thread(target=self._listen, name="fasttrack-zygote", daemon=True).start()

    def ready(self, timeout_s: float) -> bool:
        """Whether the zygote has finished its imports and can fork (waits up to ``timeout_s``)."""
        with self._changed:
            self._changed.wait_for(lambda: self._ready is not None or not self._alive, timeout_s)
            return bool(self._ready and self._alive)

    @staticmethod
    def wanted() -> bool:
        return os.environ.get(DISABLE_ENV, "") not in ("1", "true", "yes") and hasattr(socket, "send_fds")

    def _listen(self) -> None:
        while True:
            try:
                data = self._sock.recv(_MESSAGE)
            except OSError:
                data = b""
            with self._changed:
                if not data:
                    self._alive = False
                    self._changed.notify_all()
                    return
                message = json.loads(data)
                if "ready" in message:
                    self._ready = bool(message["ready"])
                elif "started" in message:
                    self._started[int(message["started"])] = int(message["pid"])
                elif "exited" in message:
                    self._exited[int(message["exited"])] = int(message["returncode"])
                self._changed.notify_all()

    def fork(
        self, command: Sequence[str], cwd: Path | None, env: Mapping[str, str], log_fd: int, lifeline: bool = True
    ) -> ForkedWorker | None:
        """Fork ``python -m MODULE ARGS...`` with stdout and stderr on ``log_fd`` and, with
        ``lifeline``, a pipe held here on stdin (else /dev/null); None when the zygote cannot
        (the caller starts the process itself)."""
        if len(command) < 3 or command[0] != sys.executable or command[1] != "-m":
            return None
        if _startup_env(env) != self._startup_env:
            return None  # e.g. another PYTHONPATH: only a fresh interpreter reads it
        with self._changed:
            if not (self._ready and self._alive):
                return None
            self._token += 1
            token = self._token
        lifeline_read, lifeline_write = os.pipe() if lifeline else (-1, -1)
        request = {
            "module": command[2],
            "args": list(command[3:]),
            "cwd": str(cwd or os.getcwd()),
            "env": dict(env),
            "token": token,
        }
        fds = [lifeline_read, log_fd] if lifeline else [log_fd]
        try:
            with self._send_lock:
                socket.send_fds(self._sock, [json.dumps(request).encode()], fds)
        except OSError:
            _close(lifeline_write)
            return None
        finally:
            _close(lifeline_read)
        with self._changed:
            self._changed.wait_for(lambda: token in self._started or not self._alive)
            pid = self._started.pop(token, None)
        if pid is None:
            _close(lifeline_write)
            return None
        return ForkedWorker(self, pid, command, os.fdopen(lifeline_write, "wb") if lifeline else None)

    def exit_status(self, pid: int, timeout: float | None) -> int | None:
        """The worker's exit code once it has ended (None: still running after ``timeout``). Should
        the zygote be gone, the worker's end is seen by its pid disappearing, and counts as a crash."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while pid not in self._exited:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                if not self._alive:
                    if not _exists(pid):
                        return -signal.SIGKILL
                    self._changed.wait(0.1 if left is None else min(0.1, left))
                    continue
                self._changed.wait(left)
            return self._exited.pop(pid)

    def close(self) -> None:
        """Stop the zygote (its running workers are the engine's to stop, through their groups)."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def _startup_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(STARTUP_ENV_PREFIXES)}


def _close(fd: int) -> None:
    if fd >= 0:
        os.close(fd)


def _exists(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie nobody reaps, as under a container's init, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return True  # no /proc here: trust the signal
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
