"""Micro-benchmarks of the latency path's ops against the stock ops they replace, per shape.

The fused RMSNorm of the latency path (`rms_norm_fused`: ``F.rms_norm``, one operator) against
the model's own (`mini_k3.tensor_parallel.rms_norm`: float32 upcast, five operators), at every
decode batch and dtype, on the test device. Each test first checks that the two agree, then times
them in interleaved pairs through fasttrack's `fasttrack.kernel_bench.bench` (the pytest plugin's
``fasttrack_bench``): the kernels check records the time per call of each, the speed-up and the
time saved per call with their bounds, and judges the manifest's claims about them
(fasttrack.yaml, ``kernel_tests[].claims``). Without fasttrack installed the tests only compare.
"""

from __future__ import annotations

import pytest
import torch
from conftest import BATCHES, DTYPE_NAMES, grid, test_device
from kernel_tolerances import KERNEL, assert_close

from mini_k3.config import MiniK3Config
from mini_k3.latency.kernel_choice import rms_norm_fused
from mini_k3.tensor_parallel import rms_norm

try:
    from fasttrack.kernel_bench import bench
except ImportError:  # the example also runs without fasttrack installed
    bench = None

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


@pytest.mark.fasttrack_scope("batch", "dtype", default=grid(batch=BATCHES, dtype=DTYPE_NAMES))
def test_fused_rms_norm_against_the_models_own(scope_point):
    batch, dtype = scope_point["batch"], DTYPES[scope_point["dtype"]]
    device, width, eps = test_device(), MiniK3Config().d_model, 1e-6
    g = torch.Generator(device=device).manual_seed(batch)
    x = torch.randn(batch, width, device=device, dtype=dtype, generator=g)
    w = (1.0 + 0.1 * torch.randn(width, device=device, generator=g)).to(dtype)
    atol, rtol = KERNEL[scope_point["dtype"]]
    assert_close(rms_norm_fused(x, w, eps), rms_norm(x, w, eps), atol, rtol, f"RMSNorm {batch}x{width}")
    if bench is not None:
        with torch.inference_mode():
            bench(lambda: rms_norm_fused(x, w, eps), lambda: rms_norm(x, w, eps), name="rms_norm", shape=(batch, width))
