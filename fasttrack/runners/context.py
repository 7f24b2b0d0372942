"""The runner API: what a runner gets besides its check instance (the manifest, the machine,
where to put artifacts, its timeout) and two helpers (build an outcome; run a subprocess that is
killed, with its whole process group, on timeout or Ctrl-C). The registry of live subprocesses
lives here too: with --jobs > 1 the engine stops them all on Ctrl-C, from another thread."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from fasttrack.evidence import Artifact, CheckOutcome, Status

if TYPE_CHECKING:
    from fasttrack.environment import Environment
    from fasttrack.instance import CheckInstance
    from fasttrack.manifest import Manifest

# Grace period between SIGTERM and SIGKILL when stopping a process group.
KILL_GRACE_S = 2.0


class LiveProcess(Protocol):
    """What the registry and `kill_group` need of a process: a ``subprocess.Popen``, or a worker
    the engine's zygote forked (fasttrack.engine.zygote.ForkedWorker)."""

    pid: int
    returncode: int | None
    stdin: IO[bytes] | None

    def wait(self, timeout: float | None = None) -> int: ...


class Forker(Protocol):
    """Starts ``command`` some cheaper way than ``subprocess.Popen``, or says it cannot (None)."""

    def fork(
        self, command: Sequence[str], cwd: Path | None, env: Mapping[str, str], log_fd: int, lifeline: bool
    ) -> LiveProcess | None: ...


_live: set[LiveProcess] = set()
_live_lock = threading.Lock()
_stopping = False  # set by stop_all: a process started after it is stopped at once
_forker: Forker | None = None  # set by the engine for a run (use_forker)


def use_forker(forker: Forker | None) -> None:
    """Start this process's ``python -m`` subprocesses through ``forker`` (None: as they are)."""
    global _forker
    _forker = forker


def register(proc: LiveProcess) -> None:
    with _live_lock:
        if not _stopping:
            _live.add(proc)
            return
    # The run is being stopped (Ctrl-C, SIGTERM) and this check's thread started its process just
    # after stop_all looked: stop it too, or the run would wait for it to finish on its own.
    kill_group(proc)


def stop_all() -> None:
    """Stop every live subprocess and any a check starts from now on (--jobs > 1: their threads,
    which the signal does not reach, may be between starting a process and registering it)."""
    global _stopping
    with _live_lock:
        _stopping = True
        procs = list(_live)
    for proc in procs:
        kill_group(proc)


def allow_starts() -> None:
    """A new run in this process may start subprocesses again."""
    global _stopping
    with _live_lock:
        _stopping = False


def unregister(proc: LiveProcess) -> None:
    with _live_lock:
        _live.discard(proc)


def live_processes() -> list[LiveProcess]:
    """Subprocesses started by run_logged and not yet finished (to stop on Ctrl-C/SIGTERM: with
    --jobs > 1 they wait in other threads, which the signal does not reach)."""
    with _live_lock:
        return list(_live)


@dataclass(frozen=True)
class ProcessResult:
    """How a subprocess ended. ``signal`` is set when it died from a signal (a crash or our kill)."""

    returncode: int | None
    timed_out: bool
    duration_s: float
    log_path: Path
    log: Artifact | None
    signal: int | None = None

    @property
    def crashed(self) -> bool:
        return self.signal is not None and not self.timed_out

    def tail(self, max_chars: int = 2000) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return text[-max_chars:]


@dataclass
class RunContext:
    """Per check instance. Picklable (the engine ships it to a worker process)."""

    manifest: Manifest
    environment: Environment | None  # None in some unit tests
    evidence_dir: Path
    artifact_dir: Path  # this instance's own folder under evidence_dir/artifacts/
    timeout_s: float  # the instance's timeout, already scaled by --timeout-scale
    base: str | None = None  # git base commit (resolved sha) or None
    head: str | None = None  # git head commit (resolved sha) or None
    timeout_scale: float = 1.0
    started_monotonic: float = field(default_factory=time.monotonic)
    # Runner-to-runner cache within one engine process (e.g. one pytest run shared by the
    # per-scope-point kernel instances). Not shipped to worker processes.
    shared: dict[str, Any] = field(default_factory=dict, repr=False)
    base_source: str | None = (
        None  # where the base came from (--base, merge-base with origin/main), or why there is none
    )
    no_cache: bool = False  # --no-cache: the eval baseline cache is neither read nor written

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["shared"] = {}
        return state

    @property
    def repo_root(self) -> Path:
        return Path(self.manifest.root)

    def remaining_s(self) -> float:
        return max(0.0, self.timeout_s - (time.monotonic() - self.started_monotonic))

    # ------------------------------------------------------------------ outcomes and artifacts

    def outcome(self, instance: CheckInstance, status: Status, **fields: Any) -> CheckOutcome:
        """A CheckOutcome for ``instance`` (id, kind, name, scope point, required filled in)."""
        point = fields.pop("scope_point", getattr(instance, "scope_point", None))
        base: dict[str, Any] = {
            "id": fields.pop("id", instance.id),
            "kind": fields.pop("kind", instance.kind),
            "name": fields.pop("name", instance.name),
            "status": status,
            "scope_point": scope_point_dict(point),
            "scope_point_id": fields.pop("scope_point_id", scope_point_id(point)),
            "required": fields.pop("required", bool(getattr(instance, "required", True))),
        }
        artifacts = tuple(a for a in fields.pop("artifacts", ()) if a is not None)
        return CheckOutcome(**base, artifacts=artifacts, **fields)

    def artifact(self, path: Path, kind: str = "log", description: str = "") -> Artifact:
        return Artifact.from_file(self.evidence_dir, Path(path), kind, description)

    def artifact_path(self, name: str) -> Path:
        self.artifact_dir.mkdir(parents=True, exist_ok=True)
        return self.artifact_dir / name

    # ------------------------------------------------------------------ subprocesses

    def run_process(
        self,
        command: Sequence[str],
        *,
        log_name: str,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        description: str = "",
    ) -> ProcessResult:
        """Run ``command`` with stdout+stderr into an artifact log; kill its process group on
        timeout (default: the instance's remaining time) or on Ctrl-C (then re-raise)."""
        log_path = self.artifact_path(log_name)
        limit = self.remaining_s() if timeout_s is None else timeout_s
        return run_logged(
            command,
            log_path,
            cwd=cwd,
            env=env,
            timeout_s=limit,
            evidence_dir=self.evidence_dir,
            description=description or " ".join(command)[:200],
        )


def run_logged(
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
    """``lifeline``: the process's stdin is a pipe only this process holds, closed when it ends
    or dies, so that the child can tell (fasttrack.engine.worker watches it). With a forker in
    use (`use_forker`: the engine's zygote) a ``python -m`` command is forked from a pre-imported
    parent where it can be; it runs, ends and is stopped exactly as a started one."""
    started = time.monotonic()
    full_env = {**os.environ, **(env or {})}
    forker = _forker
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
        register(proc)
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
            unregister(proc)
            if proc.stdin is not None:
                proc.stdin.close()
    rc = proc.returncode
    sig = -rc if rc is not None and rc < 0 else None
    artifact = Artifact.from_file(evidence_dir, log_path, "log", description)
    return ProcessResult(rc, timed_out, time.monotonic() - started, log_path, artifact, sig)


def kill_group(proc: LiveProcess) -> None:
    """SIGTERM the process group, then SIGKILL what is left after a grace period."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            # The leader is gone; make sure no child of it survives either.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            return
        except subprocess.TimeoutExpired:
            continue


def scope_point_dict(point: Any) -> dict[str, Any] | None:
    if point is None:
        return None
    if hasattr(point, "as_dict"):
        return point.as_dict()
    return dict(point)


def scope_point_id(point: Any) -> str | None:
    if point is None:
        return None
    if hasattr(point, "id"):
        return point.id
    return ",".join(f"{k}={v}" for k, v in sorted(dict(point).items()))


_UNSAFE = re.compile(r"[^A-Za-z0-9._=,-]+")


def safe_name(text: str, limit: int = 120) -> str:
    """A file-system-safe folder name for a check id."""
    name = _UNSAFE.sub("_", text).strip("._") or "check"
    if len(name) > limit:
        import hashlib

        name = name[: limit - 13] + "-" + hashlib.sha256(text.encode()).hexdigest()[:12]
    return name


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def first_line(text: str | None, limit: int = 300) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def join_limited(items: Iterable[str], limit: int = 8) -> str:
    items = list(items)
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
