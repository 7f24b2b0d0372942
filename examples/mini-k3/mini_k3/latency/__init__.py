"""mini-K3's opt-in latency-specialised decode path (the switch ``latency_specialized``).

The four techniques of the Kimi K3 path, one module each, each with its own off switch in
`LatencyOptions` (README: the table): 1. kernel_choice.py (batch-size-dependent kernels),
2. fused_allreduce.py (``o_proj`` fused with its all-reduce), 3. split_projections.py (latent and
router projections split across ranks), 4. prefetch.py (next-layer weight prefetch during
communication); plus graphs.py (CUDA graphs for the GPU decode step), shards.py (the fused
weight layout), decoder.py (`LatencyDecoder`, the step that composes them) and hook.py (the
model's entry). Each technique and the graphed step can also be turned on alone
(`LatencyOptions.only`; the engine's ``latency_techniques``, the server's per-technique flags).
Stock tensor parallelism is mini_k3/tensor_parallel.py, which imports nothing
from here: with the switch off none of this code runs, at any tensor-parallel size.
"""

from .decoder import LatencyDecoder
from .hook import active_techniques, decoder_for, latency_forward, options_from_env
from .options import ALL_TECHNIQUES, SWITCHABLE, LatencyOptions
from .prefetch import Prefetcher

__all__ = ["ALL_TECHNIQUES", "SWITCHABLE", "LatencyDecoder", "LatencyOptions", "Prefetcher", "active_techniques",
           "decoder_for", "latency_forward", "options_from_env"]
