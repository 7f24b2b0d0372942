"""One server per side per scope point, shared by every check there: the engine's server pool.

Checks run in worker processes of their own (fasttrack.engine.execute), so the servers live in
the engine's process, in a `ServerPool`, and workers reach it through a `PoolService`: a local
socket (``multiprocessing.connection``, with a per-run key) named in the workers' environment
(`POOL_ENV`). A check keeps calling `fasttrack.targets.sides.open_side` / ``opened_pair``; for a
target kind that shares its servers (``vllm``) those ask the pool for the server with the side's
exact `ServerSpec` (command, environment, folder): the first request starts it, later ones get
the running one, and ``close`` leaves it running. Servers with different arguments (a draft
length's ``--speculative-config``, an ablation arm's candidate) are different entries. Both sides
of a pair are started at once.

A pooled server that dies is never started again: every later request for it is a
`TargetError` saying so (the check is errored(target)), as is a server that did not come up.
The engine stops a point's servers once its last check that drives the target is done
(``release``) and every server at the end (``close``).
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fasttrack.errors import TargetError
from fasttrack.targets.build import from_server
from fasttrack.targets.openai.server import ManagedServer, ServerSpec

POOL_ENV = "FASTTRACK_SERVER_POOL"  # the service's socket address, for workers
POOL_KEY_ENV = "FASTTRACK_SERVER_POOL_KEY"  # its authentication key (hex)

Key = tuple[Any, ...]


def spec_key(spec: ServerSpec) -> Key:
    """What makes two requested servers the same server."""
    return (
        spec.name,
        spec.command,
        spec.url,
        tuple(sorted((str(k), str(v)) for k, v in spec.env.items())),
        spec.unset_env,
        spec.cwd,
        spec.fresh_dirs,
    )


@dataclass(frozen=True)
class PooledServer:
    """What a check gets for one side: where the server answers, its log, the build it serves."""

    name: str
    url: str
    log_path: str
    build: dict[str, Any] | None = None


@dataclass
class _Entry:
    server: ManagedServer
    ready: threading.Event = field(default_factory=threading.Event)
    error: str | None = None
    build: dict[str, Any] | None = None
    started: bool = False


class ServerPool:
    """The servers of one run, by `spec_key` (module docstring)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._entries: dict[Key, _Entry] = {}
        self._lock = threading.Lock()
        self.started: list[str] = []  # one line per server started, in order (for the run's messages)

    def acquire(self, specs: Sequence[ServerSpec]) -> list[PooledServer]:
        """The running servers of ``specs``, starting the missing ones at once, in parallel."""
        entries = [self._entry(spec) for spec in specs]
        for entry in entries:
            entry.ready.wait()
        return [self._answer(entry) for entry in entries]

    def prestart(self, specs: Iterable[ServerSpec]) -> None:
        """Start ``specs`` in the background (the run's first point, while other checks run)."""
        for spec in specs:
            self._entry(spec)

    def release(self, keep: Callable[[Key], bool]) -> list[str]:
        """Stop every server whose key ``keep`` rejects; what was stopped."""
        with self._lock:
            gone = [(key, entry) for key, entry in self._entries.items() if not keep(key)]
            for key, _entry in gone:
                del self._entries[key]
        stopped = []
        for _key, entry in gone:
            entry.ready.wait()
            entry.server.stop()
            stopped.append(f"stopped the shared {entry.server.spec.name} server ({entry.server.log_path.parent.name})")
        return stopped

    def close(self) -> None:
        self.release(lambda key: False)

    def keys(self) -> list[Key]:
        with self._lock:
            return list(self._entries)

    def _entry(self, spec: ServerSpec) -> _Entry:
        key = spec_key(spec)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                folder = self.folder / f"{len(self.started) + 1:02d}-{spec.name}"
                folder.mkdir(parents=True, exist_ok=True)
                entry = self._entries[key] = _Entry(ManagedServer(spec, folder))
                self.started.append(str(folder))
                threading.Thread(target=self._start, args=(entry,), daemon=True, name=f"pool-{spec.name}").start()
        return entry

    @staticmethod
    def _start(entry: _Entry) -> None:
        try:
            url = entry.server.start()
            entry.build = from_server(url)
            entry.started = True
        except TargetError as err:
            entry.error = str(err)
        except Exception as err:  # a bug here must not leave every waiter hanging
            entry.error = f"{type(err).__name__}: {err}"
        finally:
            entry.ready.set()

    @staticmethod
    def _answer(entry: _Entry) -> PooledServer:
        server = entry.server
        if entry.error is not None:
            raise TargetError(f"the shared {server.spec.name} server did not start: {entry.error}")
        process = server.process
        if process is None or process.poll() is not None:
            code = None if process is None else process.returncode
            raise TargetError(
                f"the shared {server.spec.name} server died (exit code {code}) during the run and is not "
                f"restarted; log: {server.log_tail()}"
            )
        return PooledServer(server.spec.name, str(server.base_url), str(server.log_path), entry.build)


class PoolService:
    """The pool behind a local socket, for the engine's worker processes (module docstring)."""

    def __init__(self, pool: ServerPool):
        from multiprocessing.connection import Listener

        self.pool = pool
        self._key = os.urandom(16)
        self._dir = tempfile.mkdtemp(prefix="fasttrack-pool-")
        self.address = os.path.join(self._dir, "pool.sock")
        self._listener = Listener(self.address, family="AF_UNIX", authkey=self._key)
        self._closed = False
        threading.Thread(target=self._serve, daemon=True, name="fasttrack-pool").start()

    def env(self) -> dict[str, str]:
        """What a worker's environment needs to reach the pool."""
        return {POOL_ENV: self.address, POOL_KEY_ENV: self._key.hex()}

    def close(self) -> None:
        self._closed = True
        try:
            self._listener.close()
        except OSError:
            pass
        self.pool.close()
        # The listener's close already removes its socket file; the folder must go either way.
        for remove, path in ((os.unlink, self.address), (os.rmdir, self._dir)):
            try:
                remove(path)
            except OSError:
                pass

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn = self._listener.accept()
            except (OSError, EOFError):
                if self._closed:
                    return
                continue  # a client that failed authentication
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: Any) -> None:
        with conn:
            try:
                request = conn.recv()
                if isinstance(request, tuple) and request[:1] == ("prestart",):  # start, answer at once
                    self.pool.prestart(request[1])
                    conn.send(("ok", []))
                    return
                conn.send(("ok", self.pool.acquire(request)))
            except TargetError as err:
                conn.send(("error", str(err)))
            except (OSError, EOFError):
                return


def remote_prestart(specs: Sequence[ServerSpec]) -> bool:
    """Ask the engine's pool to start ``specs`` in the background (a check that will need them
    one after the other gets them started together); False outside a pooled run."""
    return _ask(("prestart", list(specs))) is not None


def remote_acquire(specs: Sequence[ServerSpec]) -> list[PooledServer] | None:
    """The servers of ``specs`` from the engine's pool, or None outside a pooled run."""
    return _ask(list(specs))


def _ask(request: Any) -> list[PooledServer] | None:
    address, key = os.environ.get(POOL_ENV), os.environ.get(POOL_KEY_ENV)
    if not address or not key:
        return None
    from multiprocessing.connection import Client

    try:
        with Client(address, family="AF_UNIX", authkey=bytes.fromhex(key)) as conn:
            conn.send(request)
            status, answer = conn.recv()
    except (OSError, EOFError) as err:
        raise TargetError(f"the run's server pool at {address} cannot be reached: {err}") from None
    if status != "ok":
        raise TargetError(str(answer))
    return list(answer)
