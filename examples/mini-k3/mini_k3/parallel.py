"""Tensor-parallel process groups for mini-K3: gloo across CPU processes, NCCL across GPUs.

A `RankContext` is what one rank's code sees: its rank, the world size, the device and the
process group, plus the cross-process buffers the fused all-reduce needs (latency/fused_allreduce.py).
Two ways to run code on every rank:

* `spawn(fn, world_size, ...)` runs ``fn(ctx, *args)`` once on every rank and returns the
  rank-0 result (a benchmark, a one-off check);
* `TPWorkerPool(world_size)` starts the ranks once and then runs many jobs on them (the kernel
  tests: starting Python + torch per check would cost seconds each).

Every process (parent and workers) keeps NVLink multicast off: NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1 (set in `safe_environment`).
"""

from __future__ import annotations

import importlib
import itertools
import multiprocessing
import multiprocessing.connection
import os
import queue
import socket
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
JOB_TIMEOUT_S = 300.0


def safe_environment() -> None:
    """Force NVLink multicast off in this process (and so in the children it starts)."""
    os.environ.update(MULTICAST_OFF)


def free_port() -> int:
    """A TCP port on localhost that was free a moment ago (for the rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def backend_for(device: str) -> str:
    return "nccl" if torch.device(device).type == "cuda" else "gloo"


@dataclass
class RankContext:
    """One tensor-parallel rank: who it is, where it computes, how it talks to the others."""

    rank: int
    world_size: int
    device: torch.device
    group: Any = None  # the torch.distributed group (None at world size 1)
    shared: dict[str, Any] = field(default_factory=dict)  # cross-process buffers, by name
    state: dict[str, Any] = field(default_factory=dict)  # what jobs keep between calls on a pool

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def all_reduce_(self, tensor: torch.Tensor) -> torch.Tensor:
        """Stock all-reduce (sum) in place; the backend chooses the summation order.

        16-bit tensors are reduced in float32 and rounded once (gloo would round after every
        add, which at 4 ranks flips near-tied router choices between otherwise equal runs).
        """
        if self.distributed:
            if tensor.dtype in (torch.bfloat16, torch.float16):
                wide = tensor.float()
                dist.all_reduce(wide, group=self.group)
                tensor.copy_(wide)
            else:
                dist.all_reduce(tensor, group=self.group)
        return tensor

    def all_gather_last(self, tensor: torch.Tensor) -> torch.Tensor:
        """Concatenate every rank's ``tensor`` along the last dimension, in rank order."""
        if not self.distributed:
            return tensor
        parts = [torch.empty_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(parts, tensor.contiguous(), group=self.group)
        return torch.cat(parts, dim=-1)

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier(group=self.group)


def single_rank(device: str | torch.device = "cpu") -> RankContext:
    """The context of an unsharded run (world size 1, no process group)."""
    return RankContext(rank=0, world_size=1, device=torch.device(device))


def init_rank(rank: int, world_size: int, port: int, device: str = "cpu",
              shared: dict[str, Any] | None = None) -> RankContext:
    """Join the process group on localhost:``port``; on CUDA each rank takes GPU ``rank``."""
    safe_environment()
    torch.set_num_threads(1)  # ranks share the host's cores; more threads only contend
    dev = torch.device(device)
    if dev.type == "cuda":
        dev = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    group = None
    if world_size > 1:
        dist.init_process_group(backend_for(device), init_method=f"tcp://127.0.0.1:{port}",
                                rank=rank, world_size=world_size)
        group = dist.group.WORLD
    return RankContext(rank=rank, world_size=world_size, device=dev, group=group, shared=dict(shared or {}))


def close_rank(ctx: RankContext) -> None:
    if ctx.distributed and dist.is_initialized():
        dist.destroy_process_group()


def resolve(target: str | Callable[..., Any]) -> Callable[..., Any]:
    """A callable from ``"package.module:function"`` (what crosses the process boundary)."""
    if callable(target):
        return target
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _spawn_entry(rank: int, world_size: int, port: int, device: str, shared: dict[str, Any],
                 target: str, args: tuple, results: Any) -> None:
    ctx = init_rank(rank, world_size, port, device, shared)
    try:
        out = resolve(target)(ctx, *args)
        if rank == 0:
            results.put(out)
    finally:
        close_rank(ctx)


def spawn(target: str, world_size: int, *args: Any, device: str = "cpu",
          shared: dict[str, Any] | None = None) -> Any:
    """Run ``target(ctx, *args)`` on ``world_size`` fresh ranks; return rank 0's result.

    ``target`` is ``"module:function"`` so that spawned interpreters can import it. At world
    size 1 it runs in this process.
    """
    safe_environment()
    if world_size == 1:
        return resolve(target)(single_rank(device), *args)
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    mp.start_processes(_spawn_entry, args=(world_size, free_port(), device, dict(shared or {}), target, args, results),
                       nprocs=world_size, join=True, start_method="spawn")
    return results.get()


def _exit_with_parent() -> None:
    """Watchdog (a daemon thread in each pool worker): exit as soon as the parent process is gone.

    A worker blocked in a collective or on its job queue would otherwise live on as an orphan
    when the parent dies without closing the pool (SIGKILL, a crash, an interpreter abort).
    """
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    multiprocessing.connection.wait([parent.sentinel])
    os._exit(0)


def _pool_worker(rank: int, world_size: int, port: int, device: str, shared: dict[str, Any],
                 jobs: Any, results: Any) -> None:
    threading.Thread(target=_exit_with_parent, name="minik3-parent-watchdog", daemon=True).start()
    ctx = init_rank(rank, world_size, port, device, shared)
    try:
        while True:
            job = jobs.get()
            if job is None:
                break
            job_id, target, kwargs = job
            try:
                results.put((job_id, rank, True, resolve(target)(ctx, **kwargs)))
            except BaseException:  # noqa: BLE001 - reported to the caller; one failing job must not kill the pool
                results.put((job_id, rank, False, traceback.format_exc()))
    finally:
        close_rank(ctx)
    # Asked to stop: deliver what is queued, then skip the interpreter's teardown (torch's takes
    # seconds on a busy host, and close() would wait for it).
    results.close()
    results.join_thread()
    os._exit(0)


def _stop_workers(procs: list[Any], jobs: list[Any], results: Any, timeout_s: float = 10.0) -> None:
    for job_queue in jobs:
        try:
            job_queue.put(None)
        except (OSError, ValueError):  # queue already torn down
            pass
    deadline = time.monotonic() + timeout_s
    for proc in procs:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=2)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=2)
    for q in [*jobs, results]:
        q.cancel_join_thread()  # never block exit on undelivered items
        q.close()


class TPWorkerPool:
    """``world_size`` long-lived ranks that run jobs ``target(ctx, **kwargs)`` on every rank.

    Start once (a few seconds), run many jobs (milliseconds each). Jobs that fail on any rank
    raise `RankError` with that rank's traceback; the pool stays usable unless a rank hangs.
    With ``fail_fast`` a failure is raised as soon as one rank reports it, without waiting for
    the others (which may be stuck in a collective the failed rank never joined): the caller
    should then `close` the pool. Late answers of an earlier job are recognised by their job id
    and dropped. Use as a context manager, or call `close` (also registered to run at exit).
    """

    def __init__(self, world_size: int, device: str = "cpu", shared: dict[str, Any] | None = None) -> None:
        safe_environment()
        self.world_size = world_size
        context = mp.get_context("spawn")
        self._jobs = [context.Queue() for _ in range(world_size)]
        self._results = context.Queue()
        self._job_ids = itertools.count(1)
        self._closed = False
        port = free_port()
        self._procs = []
        for rank in range(world_size):
            proc = context.Process(target=_pool_worker, daemon=True,
                                   args=(rank, world_size, port, device, dict(shared or {}), self._jobs[rank], self._results))
            proc.start()
            self._procs.append(proc)
        # Runs on close(), when the pool is garbage-collected, or at interpreter exit.
        self._finalizer = weakref.finalize(self, _stop_workers, self._procs, self._jobs, self._results)

    @property
    def alive(self) -> bool:
        """Open, and every rank's process still running."""
        return not self._closed and all(p.is_alive() for p in self._procs)

    @property
    def pids(self) -> list[int]:
        return [int(p.pid) for p in self._procs if p.pid is not None]

    def run(self, target: str, timeout_s: float = JOB_TIMEOUT_S, fail_fast: bool = False, **kwargs: Any) -> list[Any]:
        """Run the job on every rank; the results in rank order."""
        if self._closed:
            raise RankError(f"{target}: the worker pool is closed")
        job_id = next(self._job_ids)
        for jobs in self._jobs:
            jobs.put((job_id, target, kwargs))
        outcomes: dict[int, tuple[bool, Any]] = {}
        deadline = time.monotonic() + timeout_s
        while len(outcomes) < self.world_size:
            try:
                answer_id, rank, ok, value = self._results.get(timeout=1.0)
            except queue.Empty:
                missing = sorted(set(range(self.world_size)) - set(outcomes))
                dead = [r for r in missing if not self._procs[r].is_alive()]
                if dead:
                    raise RankError(f"{target}: rank(s) {dead} exited (exit codes "
                                    f"{[self._procs[r].exitcode for r in dead]})") from None
                if time.monotonic() > deadline:
                    raise RankError(f"{target}: no answer from ranks {missing} within {timeout_s:.0f} s") from None
                continue
            if answer_id != job_id:
                continue  # a late answer to an earlier job that failed fast
            outcomes[rank] = (ok, value)
            if fail_fast and not ok:
                break
        failed = {r: v for r, (ok, v) in outcomes.items() if not ok}
        if failed:
            rank = min(failed)
            raise RankError(f"{target} failed on rank {rank} of {self.world_size}:\n{failed[rank]}")
        return [outcomes[r][1] for r in range(self.world_size)]

    def close(self) -> None:
        """Stop every rank: ask, wait, then terminate, then kill. Idempotent."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class RankError(RuntimeError):
    """A job failed (or hung) on one of the tensor-parallel ranks."""
