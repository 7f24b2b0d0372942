"""Tolerances of the kernel tests, per dtype and what is compared, with the reasons.

| compared                                   | fp32 (atol, rtol)   | bf16 (atol, rtol)            |
|--------------------------------------------|---------------------|------------------------------|
| fused o_proj + all-reduce vs the unsharded | 1e-5, 1.3e-6        | (W+1) 2**-8 p, 1.6e-2        |
|   product in fp32 (W ranks, p = largest    |                     |                              |
|   partial or result magnitude)             |                     |                              |
| unfused (library all-reduce) vs the same   | 1e-5, 1.3e-6        | (W*W+W) 2**-8 p, 1.6e-2      |
| one decode step's logits, candidate vs stock| 1e-5, 1.3e-6       | 2**-5 x max(1, max|ref|), 1.6e-2 |
| stock TP vs the unsharded model            | same as the row above                              |
| anything vs itself across runs / ranks     | bitwise (0, 0)      | bitwise (0, 0)               |
| identical rows of one batch, one step       | 1e-5, 1.3e-6        | bitwise (0, 0)               |

Why:
* fp32 everywhere: torch.testing.assert_close's defaults (atol 1e-5, rtol 1.3e-6). The paths differ
  only in summation order (fused weights change GEMM blocking; the fused all-reduce sums in rank
  order, gloo in ring order; the dense MoE adds exact zeros for unrouted experts), which moves a
  result by a few float32 ulps. Measured worst: 6.6e-7 absolute on logits of magnitude <= 1.9
  (TP 4, batch 64), 15x inside the bound.
* bf16, the fused all-reduce: the reference is the exact product in fp32. Rounding to bf16 costs
  at most half an ulp, <= 2**-8 x the value. The fused form rounds W partials and the final sum
  (its fp32 sum is exact enough): (W+1) x 2**-8 x p. The library all-reduce (gloo) adds bf16
  partials in bf16, rounding each of W intermediate sums, which can be up to W x p: (W*W+W) x
  2**-8 x p. Both bounds are worst cases that cancellation in the sum does make real (a near-zero
  result of large partials), so relative error alone would be the wrong yardstick; rtol is torch's
  bf16 default (1.6e-2, also vLLM's). The two are not compared with each other directly: both are
  held to the exact product.
* identical rows of one batch (test_batch_invariance.py): the same inputs through the same
  kernels must give the same bits, except where a library kernel handles rows in blocks with a
  different summation order for the tail rows. The CPU's fp32 GEMM does: identical rows differ
  by up to 4.8e-6 at batch 3 (2.4e-5 at batch 5) on logits of magnitude ~10, stock and candidate
  alike; so fp32 gets the kernel tolerance. bf16 rows agree bitwise on the CPU, and on the H200
  every kernel and every configuration gave bitwise-equal rows in both dtypes at batch 1-64
  (2026-12, tests/diagnostics/batch_invariance_probe.py). A stale read (issue #22: a CUDA graph
  replayed on another request's cache) moved identical rows apart by up to 12.4 in fp32 logits.
* bf16, a whole decode step: every layer rounds activations to bf16 (relative step 2**-8), and a
  different summation order can flip any of those roundings by one ulp; two layers, attention,
  softmax and the head compound that. The bound is 8 bf16 ulps at unit scale (2**-5), scaled by
  the largest logit, plus torch's bf16 rtol. Measured worst: 1.95e-2 on logits <= 1.81 (about
  one ulp at that magnitude), 2.9x inside the bound. A wrong technique (a dropped partial, a
  stale read, a wrong head slice) moves logits by O(0.1 - 1), far outside it.
"""

from __future__ import annotations

import torch

try:  # records tolerance and worst error for the evidence when the fasttrack plugin runs
    from fasttrack.kernel_testing import assert_close_recorded as _assert_close
except ImportError:  # the example also runs without fasttrack installed
    _assert_close = None

KERNEL = {"fp32": (1e-5, 1.3e-6), "bf16": (1e-3, 1.6e-2)}
ROW_TOLERANCE = {"fp32": KERNEL["fp32"], "bf16": (0.0, 0.0)}
STEP_RTOL = {"fp32": 1.3e-6, "bf16": 1.6e-2}


def allreduce_tolerance(dtype: str, world: int, scale: float, fused: bool) -> tuple[float, float]:
    """(atol, rtol) for an all-reduced product against the exact product in fp32 (see the table)."""
    if dtype == "fp32":
        return KERNEL["fp32"]
    roundings = world + 1 if fused else world * world + world
    return roundings * 2.0 ** -8 * scale, KERNEL["bf16"][1]


def step_tolerance(dtype: str, reference: torch.Tensor) -> tuple[float, float]:
    """(atol, rtol) for one decode step's logits against ``reference``."""
    if dtype == "fp32":
        return KERNEL["fp32"]
    return 2.0 ** -5 * max(1.0, float(reference.abs().max())), STEP_RTOL["bf16"]


def assert_close(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float, msg: str) -> None:
    if _assert_close is not None:
        _assert_close(actual, expected, atol=atol, rtol=rtol, msg=msg)
    else:
        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, msg=msg)
