"""Tokens per forward step as a scope dimension, switch thresholds that are values, and switch
points over workload dimensions: where a switch acts and where it must fall back to stock
(``Switch.acts_at`` / ``inert_at``), what the plan makes of them, and the kernel tests' view
(the pytest plugin's ``switch_acts``)."""

from __future__ import annotations

from pathlib import Path

import numpy  # noqa: F401  (imported here so pytester's in-process runs do not re-import it)

from fasttrack.environment import Environment
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.plan import build_plan

pytest_plugins = ["pytester"]

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures/manifests/valid/tokens-per-step-threshold.yaml"
CPU = Environment("cpu", (), "test", "loopback", "cpu", 2, "Linux", "3.11")


def switches():
    return {s.name: s for s in load_manifest(FIXTURE).switches}


def test_a_threshold_is_where_the_switch_stops_acting():
    stream, router = switches()["shared_experts_stream"], switches()["radix4_router"]
    assert stream.threshold == ("tokens_per_step", 256)
    assert stream.acts_at({"tokens_per_step": 256}) and not stream.acts_at({"tokens_per_step": 257})
    assert stream.inert_at({"tokens_per_step": 257}) and not stream.inert_at({"tokens_per_step": 1})
    assert router.acts_at({"tokens_per_step": 1024}) and router.inert_at({"tokens_per_step": 1025})
    # a deployment (no tokens_per_step on the point): the proof of path expects the switch there
    assert router.acts_at({"accelerator": "cpu"}) and not router.inert_at({"accelerator": "cpu"})


def test_switch_points_over_a_workload_dimension():
    gemm = switches()["small_batch_gemm"]
    assert gemm.acts_at({"batch": 8}) and not gemm.acts_at({"batch": 64})
    assert not gemm.inert_at({"batch": 64})  # outside its points: no promise either way
    assert gemm.acts_at({"accelerator": "cpu", "tensor_parallel": 1})  # not narrowed by batch


def test_tokens_per_step_is_a_scope_dimension_the_plan_expands():
    m = load_manifest(FIXTURE)
    assert {p.get("tokens_per_step") for p in m.scope_points()} == {1, 256, 257, 1024, 1025, 4096}
    plan = build_plan(m, CPU, KINDS)
    kernels = [i.scope_point.get("tokens_per_step") for i in plan.instances if i.kind == "kernels"]
    assert sorted(kernels) == [1, 256, 257, 1024, 1025, 4096]
    benchmarks = sorted(i.scope_point.get("tokens_per_step") for i in plan.instances if i.kind == "benchmarks")
    assert benchmarks == [1024, 4096]
    assert len([i for i in plan.instances if i.kind == "switch"]) == 1  # one deployment


def test_kernel_tests_past_the_threshold_expect_the_stock_path(pytester, tmp_path):
    pytester.makepyfile(
        """
        import pytest

        def router(tokens, fast):
            return "radix4" if fast and tokens <= 1024 else "stock"

        @pytest.mark.fasttrack_scope("tokens_per_step")
        def test_router_path(tokens_per_step, switch_acts):
            expected = "radix4" if switch_acts["radix4_router"] else "stock"
            assert router(tokens_per_step, fast=True) == expected
            assert switch_acts["radix4_router"] == (tokens_per_step <= 1024)
        """
    )
    run = pytester.runpytest("-p", "no:cacheprovider", f"--fasttrack-manifest={FIXTURE}")
    run.assert_outcomes(passed=6)
