"""How the engine runs the model: in its own process (TP 1) or on tensor-parallel ranks (TP > 1).

Both runners hold one KV cache at a time (the engine runs one batch at a time) and answer
``forward(ids, positions, decode, cache_rows, select)`` with float32 logits on the CPU's side of
the engine, plus the name of the decode path that actually ran.

`LocalRunner` is the model in this process, exactly as before tensor parallelism existed.

`TensorParallelRunner` starts ``tensor_parallel_size`` ranks with `parallel.TPWorkerPool` (gloo
processes on this host for CPU; one process per GPU with NCCL, each rank on GPU ``rank``). Every
rank holds the full weights and a replica of the latent KV cache:

* prefill runs the model's own forward on every rank (replicated: the cache must be on every
  rank, and prefill is not part of the decode path under test); only rank 0 computes the
  logits the engine asked for (``select``), so a long prompt does not ship ``[B, T, V]`` back;
* decode and speculative-verify steps run one decoder per rank: `tensor_parallel.StockDecoder`
  (heads and expert hidden units split, two all-reduces per layer) with the switch off, or
  `latency.LatencyDecoder` (the same split plus the four techniques) with it on. Rank 0 returns
  the logits.

Sampling, drafts, grammars and statistics stay in the engine's process, so every request gets
the same treatment as at TP 1. A rank that fails or dies makes the step raise `RankError`; the
runner then stops all ranks and starts fresh ones on the next call.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from mini_k3.config import MiniK3Config
from mini_k3.model import ABSORBED_MAX_TOKENS, MiniK3

STOCK_PATH = "stock"
LATENCY_PATH = "latency_specialized"
MAX_CACHES = 4  # KV caches kept per engine, one per recent (batch, length) shape
RANK_JOB_TIMEOUT_S = 600.0  # a 4,096-token prefill of 64 rows on a busy 2-core host stays well below


class EngineClosed(RuntimeError):
    """A forward pass was asked of a runner after `close`."""


def check_shardable(config: MiniK3Config, world_size: int) -> None:
    """Raise ValueError (before any process starts) if the model cannot be split ``world_size`` ways."""
    if world_size < 1:
        raise ValueError("tensor_parallel_size must be at least 1")
    widths = {"n_heads": config.n_heads}
    if config.n_dense_layers > 0:
        widths["dense_hidden"] = config.dense_hidden
    if config.n_layers > config.n_dense_layers:
        widths["expert_hidden"] = config.expert_hidden
    bad = [f"{name} {value}" for name, value in widths.items() if value % world_size]
    if bad:
        raise ValueError(f"tensor_parallel_size {world_size} does not divide {', '.join(bad)}")


def _select(logits: torch.Tensor, select: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
    return logits if select is None else logits[select[0], select[1]]


class LocalRunner:
    """The model in this process (tensor-parallel size 1)."""

    def __init__(self, model: MiniK3, device: torch.device, dtype: torch.dtype, latency_specialized: bool,
                 latency_options: Any = None) -> None:
        self.model, self.device, self.dtype = model, device, dtype
        self.latency_specialized = latency_specialized
        self.latency_options = latency_options  # None: every technique (less MINIK3_LATENCY_DISABLE)
        self._techniques: tuple[str, ...] | None = None  # what the decoder runs: fixed by the options
        self.cache: Any = None
        self._caches: OrderedDict[tuple[int, int], Any] = OrderedDict()  # recent shapes, oldest first

    def new_cache(self, batch_size: int, max_len: int) -> None:
        # A request of a shape seen recently gets that shape's cache back, zeroed: the same tensors,
        # so CUDA graphs captured on it stay valid (they address its memory) instead of being
        # recaptured by every generate call. Several shapes, because callers alternate them: a
        # benchmark times a full request and a prefill-only one, and a speculative verify step has
        # up to 8 shapes of its own per cache.
        key = (batch_size, max_len)
        cache = self._caches.pop(key, None)
        if cache is not None:
            cache.c_kv.zero_()
            cache.k_rope.zero_()
        else:
            cache = self.model.new_cache(batch_size, max_len, self.device, self.dtype)
        self._caches[key] = cache
        while len(self._caches) > MAX_CACHES:
            self._caches.popitem(last=False)
        self.cache = cache

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, decode: bool,
                cache_rows: torch.Tensor | None = None,
                select: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, str, tuple[str, ...]]:
        options: dict[str, Any] = {"latency_specialized": True} if decode and self.latency_specialized else {}
        if options and self.latency_options is not None:
            options["latency_options"] = self.latency_options
        if cache_rows is not None:
            options["cache_rows"] = cache_rows.to(self.device)
        with torch.inference_mode():
            logits = self.model(ids.to(self.device), positions.to(self.device), self.cache, **options)
            logits = _select(logits, _on(select, self.device)).float()
        if logits.device.type == "cuda":
            torch.cuda.synchronize(logits.device)  # the caller times the model, not a launch
        if not options.get("latency_specialized"):
            return logits, STOCK_PATH, ()
        if self._techniques is None:  # once: the decode step's own time is what gets measured
            from mini_k3.latency import active_techniques

            self._techniques = active_techniques(self.model, self.latency_options)
        return logits, LATENCY_PATH, self._techniques

    def close(self) -> None:
        """Drop the caches; nothing else to release (the engine stays usable)."""
        self.cache = None
        self._caches.clear()


def _on(select: tuple[torch.Tensor, torch.Tensor] | None, device: torch.device):
    return None if select is None else (select[0].to(device), select[1].to(device))


class TensorParallelRunner:
    """The model on ``world_size`` ranks (see the module docstring)."""

    def __init__(self, model: MiniK3, world_size: int, device: torch.device, dtype: torch.dtype,
                 latency_specialized: bool, latency_options: Any = None) -> None:
        check_shardable(model.config, world_size)
        self.world_size = world_size
        self.device = device
        self.dtype = dtype
        self.latency_specialized = latency_specialized
        self.latency_options = latency_options
        self._config = model.config.to_dict()
        # float32 numpy crosses the process boundary as plain bytes (no shared-memory handles);
        # ranks cast back to ``dtype``, which is exact for weights that were ``dtype`` before.
        self._state = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}
        self._pool: Any = None
        self._pending_cache: tuple[int, int] | None = None
        self.closed = False
        self._start()

    # ---- the ranks ----------------------------------------------------------------------------
    def _start(self) -> None:
        from mini_k3.parallel import TPWorkerPool

        shared = None
        options = None
        if self.latency_specialized:
            from mini_k3.latency import options_from_env
            from mini_k3.latency.fused_allreduce import allocate_shared

            if self.device.type == "cpu":  # the fused all-reduce's cross-process slots
                shared = allocate_shared(self.world_size)
            # CUDA graphs around collectives are not validated here (one GPU): eager at TP > 1
            options = replace(self.latency_options or options_from_env(), cuda_graphs=False)
        self._pool = TPWorkerPool(self.world_size, device=self.device.type, shared=shared)
        try:
            self._pool.run("mini_k3.model_runner:rank_load", timeout_s=RANK_JOB_TIMEOUT_S, fail_fast=True,
                           config=self._config, state=self._state, dtype=str(self.dtype).removeprefix("torch."),
                           options=options, latency_specialized=self.latency_specialized)
        except BaseException:
            self._stop()
            raise

    def _stop(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    @property
    def worker_pids(self) -> list[int]:
        return [] if self._pool is None else self._pool.pids

    def _run(self, target: str, **kwargs: Any) -> Any:
        if self.closed:
            raise EngineClosed("the engine is closed: its tensor-parallel ranks are stopped")
        if self._pool is None or not self._pool.alive:
            self._stop()
            self._start()
        try:
            return self._pool.run(target, timeout_s=RANK_JOB_TIMEOUT_S, fail_fast=True, **kwargs)[0]
        except BaseException:
            # a failed or interrupted step can leave ranks inside a collective: start over next time
            self._stop()
            raise

    # ---- the runner interface -----------------------------------------------------------------
    def new_cache(self, batch_size: int, max_len: int) -> None:
        self._pending_cache = (batch_size, max_len)  # sent with the next step: one round trip less

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, decode: bool,
                cache_rows: torch.Tensor | None = None,
                select: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, str, tuple[str, ...]]:
        new_cache, self._pending_cache = self._pending_cache, None
        logits, path, techniques = self._run(
            "mini_k3.model_runner:rank_forward", ids=ids.numpy(), positions=positions.numpy(), decode=decode,
            cache_rows=None if cache_rows is None else cache_rows.numpy(),
            select=None if select is None else (select[0].numpy(), select[1].numpy()), new_cache=new_cache)
        return torch.from_numpy(logits), path, tuple(techniques)

    def close(self) -> None:
        self.closed = True
        self._stop()


# ---- what runs on every rank (imported by name in the worker processes) -----------------------
class _RankModel:
    """One rank's model, decoder and current cache (kept in ``ctx.state`` between jobs)."""

    def __init__(self, ctx: Any, model: MiniK3, decoder: Any) -> None:
        self.ctx, self.model, self.decoder = ctx, model, decoder
        self.cache: Any = None


def rank_load(ctx: Any, config: dict[str, Any], state: dict[str, np.ndarray], dtype: str, options: Any,
              latency_specialized: bool) -> str | None:
    model = MiniK3(MiniK3Config.from_dict(config))
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True)
    model = model.to(device=ctx.device, dtype=getattr(torch, dtype)).eval()
    if latency_specialized:
        from mini_k3.latency import LatencyDecoder

        decoder: Any = LatencyDecoder(model, ctx, options)
    else:
        from mini_k3.tensor_parallel import StockDecoder

        decoder = StockDecoder(model, ctx)
    ctx.state["engine_rank"] = _RankModel(ctx, model, decoder)
    return decoder.path if ctx.rank == 0 else None


@torch.inference_mode()
def rank_forward(ctx: Any, ids: np.ndarray, positions: np.ndarray, decode: bool, cache_rows: np.ndarray | None,
                 select: tuple[np.ndarray, np.ndarray] | None, new_cache: tuple[int, int] | None):
    """One prefill or decode step on this rank; rank 0 returns (float32 logits as numpy, path, the
    techniques its decoder ran)."""
    rank: _RankModel = ctx.state["engine_rank"]
    device = ctx.device
    if new_cache is not None:
        rank.cache = rank.model.new_cache(*new_cache, device=device)
    ids_t = torch.from_numpy(ids).to(device)
    pos_t = torch.from_numpy(positions).to(device)
    rows_t = None if cache_rows is None else torch.from_numpy(cache_rows).to(device)
    if decode and ids_t.shape[1] <= ABSORBED_MAX_TOKENS:
        logits = _decode(rank, ids_t, pos_t, rows_t)
        if select is not None:
            logits = logits[torch.from_numpy(select[0]).to(device), torch.from_numpy(select[1]).to(device)]
        path = rank.decoder.path
        techniques = tuple(getattr(rank.decoder, "techniques", ()))
    else:
        hidden = rank.model.hidden_states(ids_t, pos_t, rank.cache, rows_t)  # replicated on every rank
        if ctx.rank != 0:
            return None
        if select is not None:
            hidden = hidden[torch.from_numpy(select[0]).to(device), torch.from_numpy(select[1]).to(device)]
        logits = F.linear(hidden, rank.model.lm_head.weight)
        path = STOCK_PATH  # prefill is not part of either decode path
        techniques = ()
    if ctx.rank != 0:
        return None
    return logits.float().cpu().numpy(), path, techniques


def _decode(rank: _RankModel, ids: torch.Tensor, positions: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    """The decoder's step, in row chunks of at most its ``max_step_tokens`` (the latency path's
    shared all-reduce slots hold that many; rows are independent)."""
    if rows is None:
        rows = torch.arange(ids.shape[0], device=ids.device)
    limit = rank.decoder.max_step_tokens
    per_chunk = ids.shape[0] if limit is None else max(1, limit // ids.shape[1])
    if ids.shape[0] <= per_chunk:
        return rank.decoder.forward(ids, positions, rank.cache, rows)
    parts = [rank.decoder.forward(ids[i:i + per_chunk], positions[i:i + per_chunk], rank.cache, rows[i:i + per_chunk])
             for i in range(0, ids.shape[0], per_chunk)]
    return torch.cat(parts)
