"""OpenAI-compatible server targets: start the declared command (or use a running URL), wait for
health, capture the log, stop it; and a small client that ``TargetLM`` can drive.

The manifest declares, per side, ``command`` (a list; ``{port}`` is replaced by a free localhost
port) or ``url``. A started server runs in its own process group, led by a guard that stops it when the process
that started it dies (``fasttrack.process.guard``), with the HF offline variables set; its
stdout+stderr go to a log file (kept as an evidence artifact), and it is stopped with SIGTERM,
then SIGKILL after a grace period. A server that exits or never answers ``health_path`` with 200
within ``startup_timeout_s`` raises ``TargetError`` quoting the end of its log.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Self

from fasttrack.errors import TargetError
from fasttrack.process.groups import GONE_WAIT_S, group_alive, signal_group, wait_gone
from fasttrack.process.guard import CPUS_ENV, REGISTRY_ENV, guard_command
from fasttrack.process.ready import free_port, wait_ready

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_UPDATE_DOWNLOAD_COUNTS": "0"}
LOG_TAIL_CHARS = 2000


@dataclass(frozen=True)
class ServerSpec:
    name: str  # "baseline" | "candidate": used in messages and the log file name
    command: tuple[str, ...] | None = None
    url: str | None = None
    health_path: str = "/health"
    startup_timeout_s: float = 120.0
    stop_timeout_s: float = 10.0
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    unset_env: tuple[str, ...] = ()  # removed from the inherited environment (a baseline's env switches)
    # Variables set to an empty folder of this server's own, made at start (vLLM's
    # PROMETHEUS_MULTIPROC_DIR: a plugin's counters reach /metrics only through one).
    fresh_dirs: tuple[str, ...] = ()
    cpus: tuple[int, ...] = ()  # the server's CPU affinity, set by its guard before it starts it

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise TargetError(f"{self.name}: declare exactly one of a server command or a URL")


def usable_cpus(spec: ServerSpec) -> tuple[int, ...]:
    """The side's declared CPUs, where this process may run on all of them (else a `TargetError`:
    pinning a server to CPUs it cannot have would fail inside its guard, or quietly share one)."""
    allowed = os.sched_getaffinity(0)
    missing = sorted(set(spec.cpus) - allowed)
    if missing:
        raise TargetError(
            f"{spec.name}: the server is declared on CPUs {list(spec.cpus)} (cpus), but CPU(s) {missing} "
            f"are not available here (this machine lets fasttrack use {sorted(allowed)})"
        )
    return spec.cpus


SERVER_DIR = "{server_dir}"  # in a command: this server's own folder (its log's), e.g. for profiler traces


def with_server_dir(word: str, folder: Path) -> str:
    return word.replace(SERVER_DIR, str(folder))


class ManagedServer:
    """Context manager: ``with ManagedServer(spec, log_dir) as server: server.base_url``."""

    def __init__(self, spec: ServerSpec, log_dir: Path):
        self.spec = spec
        self.log_path = Path(log_dir) / f"server-{spec.name}.log"
        self.base_url: str | None = None
        self.process: subprocess.Popen | None = None
        self.exit_code: int | None = None  # the code it exited with before it became healthy
        self._log: IO[bytes] | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        spec = self.spec
        if spec.url is not None:
            self.base_url = spec.url.rstrip("/")
            self._wait_healthy(process=None)
            return self.base_url
        cpus = usable_cpus(spec) if spec.cpus else ()  # refused before anything is started
        port = free_port()
        argv = [with_server_dir(str(a), self.log_path.parent).replace("{port}", str(port)) for a in spec.command or ()]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        folder = self.log_path.parent  # {server_dir} in an env value too (SGLANG_TORCH_PROFILER_DIR)
        env = {**os.environ, **OFFLINE_ENV, **{k: with_server_dir(str(v), folder) for k, v in spec.env.items()}}
        for name in spec.unset_env:
            env.pop(name, None)
        for name in spec.fresh_dirs:
            env[name] = tempfile.mkdtemp(prefix=f"{name.lower()}-{spec.name}-", dir=self.log_path.parent)
        if spec.cpus:
            env[CPUS_ENV] = ",".join(str(c) for c in cpus)
        if not argv or (
            shutil.which(argv[0], path=env.get("PATH")) is None and not Path(spec.cwd or ".", argv[0]).is_file()
        ):
            self._close_log()
            raise TargetError(f"{spec.name}: cannot start server command {argv!r}: {argv[:1]} is not a program here")
        # The server's group is led by a guard that stops it when this process dies (fasttrack.process.guard);
        # stdin is the pipe the guard watches, held open by this process only.
        registry = os.environ.get(REGISTRY_ENV) or None
        try:
            self.process = subprocess.Popen(
                guard_command(argv, registry, self.spec.stop_timeout_s),
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE,
                env=env,
                cwd=spec.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            self._close_log()
            raise TargetError(f"{spec.name}: cannot start server command {argv!r}: {exc}") from exc
        self.base_url = f"http://127.0.0.1:{port}"
        try:
            self._wait_healthy(process=self.process)
        except Exception:  # unhealthy, or no httpx to ask it with: no server outlives its start
            self.stop()
            raise
        return self.base_url

    def ensure_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise TargetError(
                f"{self.spec.name}: server exited with code {self.process.returncode}; log: {self.log_tail()}"
            )

    def stop(self) -> None:
        """SIGTERM the server's group, SIGKILL after the grace period, then SIGKILL whatever of
        the group is left (a server's own workers) and wait until none is."""
        proc, self.process = self.process, None
        if proc is not None:
            if proc.poll() is None:
                self._signal(proc, signal.SIGTERM)
                try:
                    proc.wait(timeout=self.spec.stop_timeout_s)
                except subprocess.TimeoutExpired:
                    self._signal(proc, signal.SIGKILL)
                    proc.wait(timeout=10)
            if group_alive(proc.pid):
                self._signal(proc, signal.SIGKILL)
                wait_gone(proc.pid, GONE_WAIT_S)
            if proc.stdin is not None:
                proc.stdin.close()
        self._close_log()

    def log_tail(self) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        text = text.strip()
        return ("…" + text[-LOG_TAIL_CHARS:]) if len(text) > LOG_TAIL_CHARS else (text or "(empty log)")

    def _wait_healthy(self, process: subprocess.Popen | None) -> None:
        import httpx

        from fasttrack.targets.http import shared_client

        url = f"{self.base_url}{self.spec.health_path}"

        def poll() -> str | None:
            try:
                r = shared_client().get(url, timeout=2.0)
            except httpx.HTTPError as exc:
                return type(exc).__name__
            return None if r.status_code == 200 else f"HTTP {r.status_code}"

        waited = wait_ready(poll, self.spec.startup_timeout_s, process)
        if waited.ready:
            return
        if waited.exit_code is not None:
            self.exit_code = waited.exit_code
            raise TargetError(
                f"{self.spec.name}: server exited with code {waited.exit_code} before it became "
                f"healthy; log: {self.log_tail()}"
            )
        where = f"; log: {self.log_tail()}" if process is not None else ""
        raise TargetError(
            f"{self.spec.name}: server at {url} not healthy within {self.spec.startup_timeout_s:g} s "
            f"(last: {waited.last}){where}"
        )

    @staticmethod
    def _signal(proc: subprocess.Popen, sig: int) -> None:
        signal_group(proc.pid, sig)  # the server's own process group (start_new_session)

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
