"""The kernel census as the switch's proof of path at every benchmarked point."""

from __future__ import annotations

from pathlib import Path

import pytest

from fasttrack.evidence import Status
from fasttrack.kinds.benchmarks import run as bench_run
from fasttrack.kinds.benchmarks.census import census_problems
from fasttrack.kinds.context import RunContext
from fasttrack.manifest import ScopePoint, load_manifest
from fasttrack.manifest.sections import CensusRule, thaw
from fasttrack.plan import CheckInstance

FAKE_MANIFEST = Path(__file__).resolve().parents[1] / "probes" / "fake_manifest.yaml"


def run_point(tmp_path: Path, batch: int, options: str = "{}", census: str | None = None) -> dict[str, object]:
    text = FAKE_MANIFEST.read_text()
    text = text.replace(
        '    factory: "fasttrack.probes.fake:create"\n    options: {faults: [], step_delay_s: 0.005}',
        f'    factory: "support.torch_target:create"\n    options: {options}',
    )
    proof = "  proof: {source: inprocess" + (f", census: {census}" if census else "") + "}\n"
    text = text.replace(
        "  enable: {engine_arg: latency_specialized}\n", "  enable: {engine_arg: latency_specialized}\n" + proof
    )
    path = tmp_path / "fasttrack.yaml"
    path.write_text(text)
    manifest = load_manifest(path)
    bench = manifest.benchmarks[0]
    point = ScopePoint.of({"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1, "batch": batch})
    instance = CheckInstance(
        f"benchmarks/{bench.id}@{point.id}",
        "benchmarks",
        bench.id,
        point,
        True,
        True,
        None,
        None,
        None,
        1.0,
        120.0,
        thaw(bench.raw),
    )
    outcomes = bench_run.run(instance, RunContext(manifest, None, tmp_path, tmp_path / "artifacts", 120.0))
    return {o.kind: o for o in outcomes}


def test_clean_fused_path_passes_the_census_proof(tmp_path):
    found = run_point(tmp_path, 8)
    proof = found["switch"]
    assert proof.status is Status.PASSED, proof.reason
    assert proof.id.endswith("#census") and proof.required and proof.name == "latency_specialized"
    m = proof.measurements
    assert m["kernels_per_layer"]["candidate"] < m["kernels_per_layer"]["baseline"]
    assert m["path_counter"]["latency_specialized"] > 0 and m["census_problems"] == []


def test_fallback_with_a_lying_counter_fails_where_it_falls_back(tmp_path):
    options = "{fallback_above: 4}"
    below = run_point(tmp_path, 1, options)["switch"]
    assert below.status is Status.PASSED, below.reason
    above = run_point(tmp_path, 8, options)["switch"]
    assert above.status is Status.FAILED and above.reason_code == "path_not_exercised"
    assert "the candidate's census equals stock's" in above.reason
    assert "the counter disagrees with the census" in above.reason
    assert "stock: " in above.reason and "candidate: " in above.reason  # both censuses shown


def test_a_counter_that_misses_the_optimised_path_disagrees_with_the_census(tmp_path):
    proof = run_point(tmp_path, 8, "{silent_counter: true}")["switch"]
    assert proof.status is Status.FAILED and "counted no decode step on 'latency_specialized'" in proof.reason


def test_declared_census_rules_apply_by_region(tmp_path):
    strict = "[{points: {batch: [8]}, max_kernels_per_layer_ratio: 0.3}]"
    proof = run_point(tmp_path, 8, census=strict)["switch"]
    assert proof.status is Status.FAILED and "kernels per layer candidate/stock 0.5" in proof.reason
    assert run_point(tmp_path, 1, census=strict)["switch"].status is Status.PASSED  # the rule's region is batch 8
    named = "{kernels_present: ['aten::(linear|addmm)', 'aten::fused_softmax']}"
    proof = run_point(tmp_path, 8, census=named)["switch"]
    assert proof.status is Status.FAILED and "no kernel matching 'aten::fused_softmax'" in proof.reason
    assert "aten::(linear|addmm)" not in proof.reason


def test_no_census_no_rule_no_outcome_and_a_rule_without_census_is_not_run(tmp_path):
    path = tmp_path / "fasttrack.yaml"
    path.write_text(FAKE_MANIFEST.read_text())
    manifest = load_manifest(path)
    from fasttrack.kinds.benchmarks.census import census_proof

    assert census_proof({"baseline": None, "candidate": None}, (), {}, None) is None
    ruled = census_proof({"baseline": None, "candidate": None}, (CensusRule(),), {}, None)
    assert ruled.status is Status.NOT_RUN and ruled.reason_code == "dependency"
    assert manifest.switch.proof is None


@pytest.mark.parametrize(
    ("cand", "problems"),
    [
        ({"kernels_per_step": 10, "kernels_per_layer": 5, "kernel_names": {"a": 10}}, ["equals stock's"]),
        ({"kernels_per_step": 10, "kernels_per_layer": 5, "kernel_names": {"b": 10}}, []),  # same count, other kernels
        ({"kernels_per_step": 6, "kernels_per_layer": 3, "kernel_names": {"a": 6}}, []),
    ],
)
def test_equality_is_counts_and_names(cand, problems):
    base = {"kernels_per_step": 10, "kernels_per_layer": 5, "kernel_names": {"a": 10}}
    found = census_problems(base, cand, None)
    assert [p for p in found if any(w in p for w in problems)] == found
    assert len(found) == len(problems)
