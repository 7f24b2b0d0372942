"""Technique 2: the attention output projection fused with its all-reduce.

* the fused form equals the unfused one (private partial + library all-reduce) within the
  dtype's kernel tolerance, at every batch and TP size;
* the stress test repeats it hundreds of times with random per-rank delays and requires
  every sum to be bitwise the rank-order sum and two runs to be bitwise identical;
* the planted ordering bug (the buffer read moved ahead of the wait, as the source article's
  audit found a compiler had done) makes that same stress test fail.
"""

from __future__ import annotations

import os

import pytest
from conftest import BATCHES, DTYPE_NAMES, TP_SIZES, grid
from kernel_tolerances import allreduce_tolerance, assert_close

STRESS_ITERATIONS = 300
STRESS_MAX_DELAY_US = 200


@pytest.mark.fasttrack_scope("batch", "tensor_parallel", "dtype",
                             default=grid(batch=BATCHES, tensor_parallel=TP_SIZES, dtype=DTYPE_NAMES))
def test_fused_matches_unfused(ranks, scope_point):
    batch, tp, dtype = scope_point["batch"], scope_point["tensor_parallel"], scope_point["dtype"]
    results = ranks.run(tp, "tp_jobs:fused_vs_unfused", rows=batch, dtype=dtype, seed=batch)
    first = results[0]
    scale = float(max(first["partial_scale"], first["full_fp32"].abs().max()))
    atol, rtol = allreduce_tolerance(dtype, tp, scale, fused=True)
    assert_close(first["fused"], first["full_fp32"], atol, rtol, f"fused vs exact product, TP {tp}, {dtype}")
    atol, rtol = allreduce_tolerance(dtype, tp, scale, fused=False)
    assert_close(first["unfused"], first["full_fp32"], atol, rtol, f"unfused vs exact product, TP {tp}, {dtype}")
    for rank, other in enumerate(results[1:], start=1):  # the rank-order sum is the same bits everywhere
        assert (other["fused"] == first["fused"]).all(), f"rank {rank} reduced to different bits than rank 0"


def stress_delay_us() -> int:
    """The delay bound: MINIK3_INJECT_DELAY_US when set (the gate's stress audit sets it), else 200."""
    value = os.environ.get("MINIK3_INJECT_DELAY_US", "").strip()
    return int(value) if value else STRESS_MAX_DELAY_US


def run_stress(ranks, tp: int, plant_ordering_bug: bool, seed: int) -> None:
    """The stress check: hundreds of fused all-reduces, random delays, bitwise-exact sums, twice."""
    digests = []
    for _ in range(2):
        results = ranks.run(tp, "tp_jobs:stress_fused", iterations=STRESS_ITERATIONS, max_delay_us=stress_delay_us(),
                            plant_ordering_bug=plant_ordering_bug, seed=seed)
        wrong = {r["rank"]: r["wrong"] for r in results if r["wrong"]}
        assert not wrong, f"TP {tp}: wrong fused sums per rank {wrong} of {STRESS_ITERATIONS}"
        assert len({r["digest"] for r in results}) == 1, f"TP {tp}: ranks disagree on the sums"
        digests.append(results[0]["digest"])
    assert digests[0] == digests[1], f"TP {tp}: two identical runs gave different bits"


@pytest.mark.fasttrack_scope("tensor_parallel", default=grid(tensor_parallel=[2, 4]))
def test_stress(ranks, scope_point):
    """At TP 1 there is no cross-rank buffer to race on: it then only checks run-to-run bits."""
    run_stress(ranks, scope_point["tensor_parallel"], plant_ordering_bug=False, seed=7)


@pytest.mark.parametrize("tp", [2, 4])
def test_planted_ordering_bug_fails_stress(ranks, tp):
    """Reading the shared buffer before the wait must be caught by the stress test."""
    with pytest.raises(AssertionError, match="wrong fused sums|different bits|disagree"):
        run_stress(ranks, tp, plant_ordering_bug=True, seed=7)
