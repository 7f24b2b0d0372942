"""Run a command with its output in a log, killed with its whole process group on timeout or
Ctrl-C; and the table of a run's live processes.

The table (`Processes`) belongs to one run: the engine makes one, hands it to every check's
`RunContext` and starts its workers through it, and on Ctrl-C with ``--jobs`` > 1 stops every
process in it from the main thread (the other threads, which the signal does not reach, wait on
them). It also holds how processes start: as they are (``subprocess.Popen``), or forked from a
pre-imported parent by a `Forker` (the engine's zygote, `fasttrack.process.zygote`)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from fasttrack.evidence import Artifact
from fasttrack.process.groups import LiveProcess, kill_group
from fasttrack.process.logcap import LOG_MAX_BYTES, cap_log, read_tail


class Forker(Protocol):
    """Starts ``command`` some cheaper way than ``subprocess.Popen``, or says it cannot (None)."""

    def fork(
        self, command: Sequence[str], cwd: Path | None, env: Mapping[str, str], log_fd: int, lifeline: bool
    ) -> LiveProcess | None: ...


@dataclass(frozen=True)
class ProcessResult:
    """How a subprocess ended. ``signal`` is set when it died from a signal (a crash or our kill)."""

    returncode: int | None
    timed_out: bool
    duration_s: float
    log_path: Path
    log: Artifact | None
    signal: int | None = None
    output_bytes: int | None = None  # what the process printed (the log keeps at most LOG_MAX_BYTES)

    @property
    def crashed(self) -> bool:
        return self.signal is not None and not self.timed_out

    def tail(self, max_chars: int = 2000) -> str:
        return read_tail(self.log_path, max_chars)


class Processes:
    """The live processes of one run and how they start (``forker``: None starts them as they are)."""

    def __init__(self, forker: Forker | None = None) -> None:
        self.forker = forker
        self._live: set[LiveProcess] = set()
        self._lock = threading.Lock()
        self._stopping = False  # set by stop_all: a process started after it is stopped at once

    def register(self, proc: LiveProcess) -> None:
        with self._lock:
            if not self._stopping:
                self._live.add(proc)
                return
        # The run is being stopped (Ctrl-C, SIGTERM) and this check's thread started its process just
        # after stop_all looked: stop it too, or the run would wait for it to finish on its own.
        kill_group(proc)

    def unregister(self, proc: LiveProcess) -> None:
        with self._lock:
            self._live.discard(proc)

    def stop_all(self) -> None:
        """Stop every live process and any a check starts from now on (--jobs > 1: their threads,
        which the signal does not reach, may be between starting a process and registering it)."""
        with self._lock:
            self._stopping = True
            procs = list(self._live)
        for proc in procs:
            kill_group(proc)

    def allow_starts(self) -> None:
        """Processes may start again (a table reused after a stop)."""
        with self._lock:
            self._stopping = False

    def live(self) -> list[LiveProcess]:
        """Processes started by `run_logged` and not yet finished."""
        with self._lock:
            return list(self._live)

    def run_logged(
        self,
        command: Sequence[str],
        log_path: Path,
        *,
        cwd: Path | None,
        env: Mapping[str, str] | None,
        timeout_s: float,
        evidence_dir: Path,
        description: str = "",
        lifeline: bool = False,
    ) -> ProcessResult:
        """Run ``command`` in its own session with stdout and stderr into ``log_path``; kill its
        group on timeout or on any exception (Ctrl-C: then re-raise). ``lifeline``: the process's
        stdin is a pipe only this process holds, closed when it ends or dies, so that the child can
        tell (fasttrack.engine.worker watches it). With a forker a ``python -m`` command is forked
        from a pre-imported parent where it can be; it runs, ends and is stopped exactly as a
        started one."""
        started = time.monotonic()
        full_env = {**os.environ, **(env or {})}
        forker = self.forker
        with open(log_path, "wb") as log:
            forked = forker.fork(command, cwd, full_env, log.fileno(), lifeline) if forker is not None else None
            proc: LiveProcess = forked or subprocess.Popen(
                list(command),
                cwd=cwd,
                env=full_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE if lifeline else subprocess.DEVNULL,
                start_new_session=True,
            )
            self.register(proc)
            timed_out = False
            try:
                proc.wait(timeout=max(0.01, timeout_s))
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_group(proc)
            except BaseException:
                kill_group(proc)
                raise
            finally:
                self.unregister(proc)
                if proc.stdin is not None:
                    proc.stdin.close()
        rc = proc.returncode
        sig = -rc if rc is not None and rc < 0 else None
        printed = cap_log(log_path)
        if printed > LOG_MAX_BYTES:
            description = f"{description} ({printed} bytes printed; the middle is cut, the tail kept)"
        artifact = Artifact.from_file(evidence_dir, log_path, "log", description)
        return ProcessResult(rc, timed_out, time.monotonic() - started, log_path, artifact, sig, printed)
