"""mini-K3's opt-in latency-specialised decode path (the switch ``latency_specialized``).

The four techniques of the Kimi K3 path, each with its own switch in `LatencyOptions`:
1. batch-size-dependent kernels (kernels.py), 2. the attention output projection fused with its
all-reduce (../fused_allreduce.py), 3. latent and router projections split across ranks and
gathered, 4. next-layer weight prefetch during communication (decoder.py); plus CUDA graphs for
the GPU decode step (graphs.py). The stock path is untouched: with the switch off none of this
code runs.
"""

from .decoder import Prefetcher, ShardedDecoder
from .hook import decoder_for, latency_forward, options_from_env
from .options import ALL_TECHNIQUES, LatencyOptions

__all__ = ["ALL_TECHNIQUES", "LatencyOptions", "Prefetcher", "ShardedDecoder", "decoder_for",
           "latency_forward", "options_from_env"]
