"""Technique 2: the attention output projection fused with its all-reduce.

Off switch: ``LatencyOptions.fused_allreduce`` (env ``MINIK3_LATENCY_DISABLE=fused_allreduce``): the
projection then writes a private partial (technique 1's kernel) and calls the library all-reduce,
as stock does. The shared slots here also carry technique 3's all-gather on CPU ranks
(`FusedAllReduce.linear_all_gather`).

Stock tensor parallelism computes each rank's partial ``o_proj`` output into a private tensor
and then calls the library all-reduce (gloo / NCCL), which copies it into its own buffers and
sums in an order of its choosing. The fused form has every rank write its partial *straight into
a buffer all ranks can read*, wait ONCE until every rank has written, and then sum the partials
itself in rank order (0, 1, ..., W-1) — so every rank, on every run, gets bitwise the same sum.

Where the buffer lives:

* CPU (gloo ranks on one host): a ``share_memory_()`` tensor created before the ranks start
  (`allocate_shared`), two slots x world x bytes, plus one int64 "epoch written" flag per rank.
  The one synchronisation is a flag wait: a rank publishes its epoch after its write and spins
  (yielding the core) until every flag has reached the epoch. Two slots alternate, so a fast rank
  can never overwrite a slot a slow rank is still reading (it would first need the slow rank's
  flag for the next epoch, which that rank sets only after it has read). x86 keeps stores in
  order (TSO), so a flag seen implies the partial written before it is visible.
* CUDA, world > 1: torch symmetric memory when ``MINIK3_GPU_SYMM_MEM=1`` (each rank's partial in
  its symmetric buffer, one ``barrier``, peers' buffers read in rank order) — NOT run here (only
  one GPU was available); otherwise NCCL all_reduce of the partial (not fused, stated as such).
* world size 1: the projection alone; there is nothing to reduce.

Testing hooks: ``MINIK3_INJECT_DELAY_US=D`` sleeps a random 0..D µs per rank before each write
(ranks arrive out of step), and ``plant_ordering_bug=True`` (or ``MINIK3_PLANT_ORDERING_BUG=1``)
reads the buffer BEFORE the wait — the compiler reordering the source article's audit found. The
stress test in tests/kernels shows that the planted bug gives wrong, run-to-run different sums.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

import torch
import torch.nn.functional as F

from ..parallel import RankContext

DELAY_ENV = "MINIK3_INJECT_DELAY_US"
BUG_ENV = "MINIK3_PLANT_ORDERING_BUG"
SYMM_MEM_ENV = "MINIK3_GPU_SYMM_MEM"
SLOTS = 2
WAIT_TIMEOUT_S = 60.0
DEFAULT_MAX_BYTES = 1 << 20  # per rank and slot: 64 tokens x 8 positions x 512 features x 4 bytes


def allocate_shared(world_size: int, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, torch.Tensor]:
    """The cross-process buffers for CPU ranks; create BEFORE starting them, pass as ``shared``."""
    return {
        "fused_data": torch.zeros(SLOTS, world_size, max_bytes, dtype=torch.uint8).share_memory_(),
        "fused_flags": torch.zeros(world_size, dtype=torch.int64).share_memory_(),
    }


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


class FusedAllReduce:
    """One rank's handle on the shared partial buffers (get it with `for_rank`)."""

    def __init__(self, ctx: RankContext) -> None:
        self.ctx = ctx
        self.epoch = 0
        self.rng = random.Random(1_000_003 * (ctx.rank + 1))
        self.mode = self._choose_mode()

    @classmethod
    def for_rank(cls, ctx: RankContext) -> "FusedAllReduce":
        """The rank's one handle: the epoch count must persist across calls."""
        handle = ctx.state.get("fused_allreduce")
        if handle is None:
            handle = ctx.state["fused_allreduce"] = cls(ctx)
        return handle

    def _choose_mode(self) -> str:
        ctx = self.ctx
        if not ctx.distributed:
            return "local"
        if ctx.device.type == "cpu":
            if "fused_data" not in ctx.shared:
                raise RuntimeError("CPU fused all-reduce needs shared buffers: pass allocate_shared(...) to the ranks")
            return "shared_cpu"
        if env_flag(SYMM_MEM_ENV):
            self._setup_symmetric_memory()
            return "symm_mem"
        return "nccl"

    # ---- the fused operation ---------------------------------------------------------------
    def linear_all_reduce(self, x: torch.Tensor, weight: torch.Tensor,
                          plant_ordering_bug: bool | None = None) -> torch.Tensor:
        """``sum over ranks of x @ weight.T`` (``x`` ``[..., in]``, ``weight`` ``[out, in]``)."""
        if plant_ordering_bug is None:
            plant_ordering_bug = env_flag(BUG_ENV)
        lead, out_features = x.shape[:-1], weight.shape[0]
        x2d = x.reshape(-1, x.shape[-1])
        if self.mode == "local":
            return F.linear(x2d, weight).view(*lead, out_features)
        if self.mode == "nccl":
            partial = F.linear(x2d, weight)
            return self.ctx.all_reduce_(partial).view(*lead, out_features)
        if self.mode == "symm_mem":
            return self._symm_mem_linear(x2d, weight).view(*lead, out_features)
        return self._shared_cpu_linear(x2d, weight, plant_ordering_bug).view(*lead, out_features)

    def linear_all_gather(self, x: torch.Tensor, weight_slice: torch.Tensor) -> torch.Tensor:
        """Every rank's ``x @ weight_slice.T`` concatenated along the last dimension in rank order
        (technique 3's gather). On CPU ranks it goes through the same shared slots and the same one
        flag wait as the all-reduce (gloo's all_gather costs about a millisecond here); elsewhere
        it is the library all_gather."""
        lead, cols = x.shape[:-1], weight_slice.shape[0]
        x2d = x.reshape(-1, x.shape[-1])
        if self.mode == "local":
            return F.linear(x2d, weight_slice).view(*lead, cols)
        if self.mode != "shared_cpu":
            return self.ctx.all_gather_last(F.linear(x2d, weight_slice)).view(*lead, cols * self.ctx.world_size)
        self.epoch += 1
        parts = self._partials(self.epoch % SLOTS, x2d.shape[0], cols, x2d.dtype)
        self._inject_delay()
        torch.matmul(x2d, weight_slice.t(), out=parts[self.ctx.rank])
        self._publish_and_wait()
        return torch.cat(parts, dim=-1).view(*lead, cols * self.ctx.world_size)

    def _partials(self, slot: int, rows: int, cols: int, dtype: torch.dtype) -> list[torch.Tensor]:
        data = self.ctx.shared["fused_data"]
        nbytes = rows * cols * torch.empty((), dtype=dtype).element_size()
        if nbytes > data.shape[2]:
            raise ValueError(f"fused all-reduce buffer holds {data.shape[2]} bytes per rank, {nbytes} needed")
        return [data[slot, r, :nbytes].view(dtype).view(rows, cols) for r in range(self.ctx.world_size)]

    def _shared_cpu_linear(self, x2d: torch.Tensor, weight: torch.Tensor, plant_ordering_bug: bool) -> torch.Tensor:
        self.epoch += 1
        slot = self.epoch % SLOTS
        parts = self._partials(slot, x2d.shape[0], weight.shape[0], x2d.dtype)
        self._inject_delay()
        torch.matmul(x2d, weight.t(), out=parts[self.ctx.rank])  # the partial goes straight into the shared slot
        if plant_ordering_bug:
            early = rank_order_sum(parts)  # BUG (planted on purpose): peers may not have written yet
            self._publish_and_wait()
            return early
        self._publish_and_wait()
        return rank_order_sum(parts)

    def _inject_delay(self) -> None:
        max_us = int(os.environ.get(DELAY_ENV, "0") or 0)
        if max_us > 0:
            time.sleep(self.rng.uniform(0, max_us) * 1e-6)

    def _publish_and_wait(self) -> None:
        """The one synchronisation: publish this rank's epoch, wait for every rank's."""
        flags = self.ctx.shared["fused_flags"]
        flags[self.ctx.rank] = self.epoch
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        while not bool((flags >= self.epoch).all()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"rank {self.ctx.rank}: peers did not reach epoch {self.epoch} "
                                   f"within {WAIT_TIMEOUT_S:.0f} s (flags {flags.tolist()})")
            os.sched_yield()  # ranks may outnumber cores: let the writers run

    # ---- GPU symmetric memory (several GPUs; not exercised on the one-GPU machine) ----------
    def _setup_symmetric_memory(self) -> None:
        import torch.distributed._symmetric_memory as symm_mem

        self._symm_buffer = symm_mem.empty(SLOTS * DEFAULT_MAX_BYTES, dtype=torch.uint8, device=self.ctx.device)
        self._symm_handle = symm_mem.rendezvous(self._symm_buffer, self.ctx.group.group_name)

    def _symm_mem_linear(self, x2d: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        self.epoch += 1
        slot = self.epoch % SLOTS
        rows, cols, dtype = x2d.shape[0], weight.shape[0], x2d.dtype
        nbytes = rows * cols * x2d.element_size()
        offset = slot * DEFAULT_MAX_BYTES
        parts = []
        for r in range(self.ctx.world_size):
            peer = self._symm_handle.get_buffer(r, (SLOTS * DEFAULT_MAX_BYTES,), torch.uint8)
            parts.append(peer[offset: offset + nbytes].view(dtype).view(rows, cols))
        torch.matmul(x2d, weight.t(), out=parts[self.ctx.rank])
        self._symm_handle.barrier(channel=0)
        out = rank_order_sum(parts)
        self._symm_handle.barrier(channel=1)  # nobody overwrites a slot a peer may still read
        return out


def rank_order_sum(parts: list[torch.Tensor]) -> torch.Tensor:
    """Sum in rank order, accumulating in float32: the same bits on every rank and run."""
    acc = parts[0].float().clone()
    for part in parts[1:]:
        acc += part.float()
    return acc.to(parts[0].dtype)


def fused_linear_all_reduce(ctx: RankContext, x: torch.Tensor, weight: torch.Tensor,
                            plant_ordering_bug: bool | None = None) -> torch.Tensor:
    """Convenience: the rank's handle's `FusedAllReduce.linear_all_reduce`."""
    return FusedAllReduce.for_rank(ctx).linear_all_reduce(x, weight, plant_ordering_bug)


__all__: list[Any] = ["FusedAllReduce", "allocate_shared", "fused_linear_all_reduce", "rank_order_sum",
                      "DELAY_ENV", "BUG_ENV"]
