"""The model's entry to the latency path: ``MiniK3.forward(..., latency_specialized=True)``.

Only cached decode / speculative-verify steps (at most ``ABSORBED_MAX_TOKENS`` new tokens per
row) take the latency path; anything else (prefill, no cache) is not part of the decode path and
runs the stock forward. In-process this is tensor-parallel size 1; tensor parallelism runs one
`LatencyDecoder` per rank (model_runner.py).

Ablation from outside (engine, server): ``MINIK3_LATENCY_DISABLE=fused_allreduce,prefetch,...``
turns techniques off by their `LatencyOptions` field names.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import fields

import torch

from ..model import ABSORBED_MAX_TOKENS, KVCache, MiniK3
from ..parallel import single_rank
from .decoder import LatencyDecoder
from .options import LatencyOptions

DISABLE_ENV = "MINIK3_LATENCY_DISABLE"
_DECODERS: "weakref.WeakKeyDictionary[MiniK3, tuple[tuple, object]]" = weakref.WeakKeyDictionary()


def options_from_env() -> LatencyOptions:
    names = [n.strip() for n in os.environ.get(DISABLE_ENV, "").split(",") if n.strip()]
    known = {f.name for f in fields(LatencyOptions) if f.type in ("bool", bool)}
    unknown = sorted(set(names) - known)
    if unknown:
        raise ValueError(f"{DISABLE_ENV}: unknown technique(s) {unknown}; known: {sorted(known)}")
    return LatencyOptions().without(*names)


def _weights_signature(model: MiniK3) -> tuple:
    """Changes when the weights are replaced, moved, cast or updated in place."""
    params = list(model.parameters())
    return (params[0].data_ptr(), params[0].dtype, params[0].device, sum(p._version for p in params))


def decoder_for(model: MiniK3, options: LatencyOptions | None = None):
    """The model's cached latency decoder (rebuilt when its weights or the options change)."""
    options = options or options_from_env()
    signature = (_weights_signature(model), options)
    cached = _DECODERS.get(model)
    if cached is not None and cached[0] == signature:
        return cached[1]
    device = next(model.parameters()).device
    decoder = LatencyDecoder(model, single_rank(device), options)
    runner = decoder
    if device.type == "cuda" and options.cuda_graphs:
        from .graphs import GraphedDecoder

        runner = GraphedDecoder(decoder)
    _DECODERS[model] = (signature, runner)
    return runner


def active_techniques(model: MiniK3, options: LatencyOptions | None = None) -> tuple[str, ...]:
    """The techniques the model's latency decode steps run with these options (see
    `LatencyDecoder.techniques`; plus ``cuda_graphs`` when the steps are graphed)."""
    return decoder_for(model, options).techniques


def latency_forward(model: MiniK3, input_ids: torch.Tensor, positions: torch.Tensor | None, cache: KVCache | None,
                    cache_rows: torch.Tensor | None, options: LatencyOptions | None = None) -> torch.Tensor:
    """Logits ``[B, T, V]``: the latency path for decode steps, the stock forward otherwise."""
    if cache is None or positions is None or input_ids.shape[1] > ABSORBED_MAX_TOKENS:
        return model(input_ids, positions, cache, cache_rows)
    if int(positions.max()) >= model.config.max_position:
        raise ValueError(f"position {int(positions.max())} exceeds max_position {model.config.max_position}")
    if cache_rows is None:
        if input_ids.shape[0] != cache.batch_size:
            raise ValueError("batch size differs from the cache's: pass cache_rows")
        cache_rows = torch.arange(input_ids.shape[0], device=input_ids.device)
    runner = decoder_for(model, options)
    if isinstance(runner, LatencyDecoder):
        return runner.forward(input_ids, positions, cache, cache_rows)
    return runner(input_ids, positions, cache, cache_rows)
