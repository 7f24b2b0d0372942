"""build_plan: check instances per scope point, runnable here or exactly why not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fasttrack.environment import Accelerator, Environment
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.plan import blockers, build_plan, planner, render_plan_table

REPO = Path(__file__).resolve().parents[2]
MINI = REPO / "tests/fixtures/manifests/valid/cpu-and-h200.yaml"  # frozen copy of the first mini-k3 manifest
KIMI = REPO / "examples/kimi-k3-latency/fasttrack.yaml"
FULL = REPO / "tests/fixtures/manifests/valid/full.yaml"


def machine(gpus: int = 0, name: str = "NVIDIA H200", interconnect: str | None = None) -> Environment:
    accelerators = tuple(Accelerator(i, name, 141 * 2**30) for i in range(gpus))
    link = interconnect or ("loopback" if gpus == 0 else "none" if gpus == 1 else "nvlink")
    return Environment(
        accelerators[0].name if gpus else "cpu", accelerators, "test", link, "Test CPU", 2, "Linux", "3.11"
    )


def test_cpu_machine_runs_the_cpu_part_of_mini_k3():
    result = build_plan(load_manifest(MINI), machine(), KINDS)
    # the first mini-k3 manifest states no benchmark claims and no stock_unchanged section
    # refused: an in-process target has no server to refuse a combination
    assert {i.kind for i in result.instances} == set(KINDS) - {"claims", "stock_unchanged", "refused"}
    for inst in result.instances:
        accelerator = inst.scope_point.get("accelerator") if inst.scope_point else None
        if accelerator == "NVIDIA H200":
            assert not inst.runnable and inst.reason_code == "hardware"
            assert "needs NVIDIA H200 x1 (scope hardware entry 2)" in inst.reason
            assert "this machine has: cpu (2 cores), no GPU" in inst.reason
        else:
            assert inst.runnable, inst
    assert len(result.runnable()) + len(result.not_runnable()) == len(result.instances)


def test_h200_machine_runs_everything_of_mini_k3():
    result = build_plan(load_manifest(MINI), machine(gpus=1), KINDS)
    assert result.not_runnable() == () or {i.reason_code for i in result.not_runnable()} == {"dependency"}


def test_instance_ids_are_unique_and_stable():
    first = build_plan(load_manifest(MINI), machine(), KINDS)
    second = build_plan(load_manifest(MINI), machine(), KINDS)
    ids = [i.id for i in first.instances]
    assert len(ids) == len(set(ids))
    assert ids == [i.id for i in second.instances]
    assert "evals/mrcr@accelerator=cpu,device_count=1,tensor_parallel=2" in ids
    assert "scope_diff/code_paths" in ids


def test_dimensions_per_kind():
    m = load_manifest(MINI)
    result = build_plan(m, machine(), KINDS)
    by_kind = result.by_kind()
    setups = len(m.hardware_setups())
    assert len(by_kind["switch"]) == setups
    assert len(by_kind["evals"]) == setups * len(m.evals)
    assert len(by_kind["features"]) == setups * (5 + len(m.scope.dtypes))  # full_context at each dtype
    assert len(by_kind["divergence"]) == setups * len(m.scope.dtypes)
    assert len(by_kind["speculative"]) == setups * 7
    kernel_dims = set(by_kind["kernels"][0].scope_point.names())
    assert kernel_dims == {"accelerator", "device_count", "batch", "tensor_parallel", "dtype", "draft_length"}
    # benchmark decode-per-user is pinned to tensor_parallel 1 and batches 1, 8, 64
    decode = [i for i in by_kind["benchmarks"] if i.name == "decode-per-user"]
    assert {(i.scope_point.get("accelerator"), i.scope_point.get("batch")) for i in decode} == {
        (acc, b) for acc in ("cpu", "NVIDIA H200") for b in (1, 8, 64)
    }
    assert all(i.scope_point.get("tensor_parallel") == 1 for i in decode)


def test_missing_python_dependency_is_reported(monkeypatch):
    real = planner.find_spec
    monkeypatch.setattr(planner, "find_spec", lambda name: None if name == "lm_eval" else real(name))
    result = build_plan(load_manifest(MINI), machine(gpus=1), KINDS)
    evals = result.by_kind()["evals"]
    assert all(not i.runnable and i.reason_code == "dependency" and "lm_eval" in i.reason for i in evals)
    assert all(i.runnable for i in result.by_kind()["divergence"])
    assert "dependency: lm_eval (8)" in result.summary()


def test_kimi_needs_gb300_with_nvlink():
    m = load_manifest(KIMI)
    on_cpu = build_plan(m, machine(), KINDS)
    # Only the claims lint (manifest data, no hardware) runs on a CPU machine: one per claim.
    claim_ids = [c["id"] for b in m.section("benchmarks") for c in b.get("claims") or ()]
    assert [i.id for i in on_cpu.runnable()] == [f"claims/{c}" for c in claim_ids] and len(claim_ids) == 7
    reasons = {i.reason for i in on_cpu.not_runnable() if i.reason_code == "hardware"}
    assert any("needs NVIDIA GB300 x8 over nvlink in one NVLink domain (scope hardware entry 1)" in r for r in reasons)
    assert any("needs NVIDIA GB300 x16" in r for r in reasons)
    # 8 GB300 over PCIe: the 8-GPU setup lacks NVLink, the 16-GPU setups lack GPUs
    pcie = build_plan(m, machine(gpus=8, name="NVIDIA GB300", interconnect="pcie"), KINDS)
    eight = [i for i in pcie.instances if i.scope_point is not None and i.scope_point.get("device_count") == 8]
    assert all("linked by NVLink" in i.reason for i in eight if i.reason_code == "hardware")
    # 16 GB300 over NVLink: hardware is fine; vllm (the target) is what is missing here
    full = build_plan(m, machine(gpus=16, name="NVIDIA GB300"), KINDS)
    assert not any(i.reason_code == "hardware" for i in full.instances)
    target_kinds = {i.kind for i in full.not_runnable() if i.reason_code == "target"}
    assert {"evals", "switch", "benchmarks"} <= target_kinds or blockers.shutil.which("vllm")


def test_sanitizer_without_gpu_in_scope_is_out_of_scope(tmp_path):
    text = (REPO / "tests/fixtures/manifests/valid/minimal.yaml").read_text()
    text += "audits:\n  - {id: rc, kind: compute_sanitizer, test: 't.py::t', tools: [racecheck]}\n"
    path = tmp_path / "m.yaml"
    path.write_text(text)
    [inst] = build_plan(load_manifest(path), machine(), KINDS).by_kind()["sanitizer"]
    assert inst.scope_point is None and inst.reason_code == "out_of_scope"


def test_python_target_that_does_not_exist(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text((REPO / "tests/fixtures/manifests/valid/minimal.yaml").read_text())
    result = build_plan(load_manifest(path), machine(), KINDS)
    switch = result.by_kind()["switch"][0]
    assert switch.reason_code == "target" and "tiny.target" in switch.reason
    # scope_diff is not a target check, but tmp_path is no git repository
    assert result.by_kind()["scope_diff"][0].reason_code == "target"


def test_timeouts_and_configs_come_from_the_manifest():
    result = build_plan(load_manifest(FULL), machine(), KINDS)
    by_kind = result.by_kind()
    assert by_kind["evals"][0].timeout_s == 3600  # the eval's own timeout_s
    assert by_kind["kernels"][0].timeout_s == 900
    assert by_kind["switch"][0].timeout_s == 600  # timeouts.default_s
    assert by_kind["evals"][0].config["task"] == "mrcr_local"
    assert all(i.est_seconds > 0 for i in result.instances if i.scope_point is not None)


def test_to_dict_is_json_and_table_has_a_summary():
    result = build_plan(load_manifest(MINI), machine(), KINDS)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["total"] == len(result.instances) and data["runnable"] == len(result.runnable())
    table = render_plan_table(result)
    assert table.splitlines()[-2] == result.summary()
    assert result.summary().startswith(
        f"{len(result.runnable())} of {len(result.instances)} check instances runnable here; missing: hardware: NVIDIA H200 x1"
    )
    assert len(render_plan_table(result, group=False).splitlines()) > len(table.splitlines())


@pytest.mark.parametrize("path", [MINI, KIMI, FULL], ids=lambda p: p.parent.name)
def test_every_non_runnable_instance_says_why(path):
    for inst in build_plan(load_manifest(path), machine(), KINDS).not_runnable():
        assert inst.reason_code in {"hardware", "dependency", "target", "out_of_scope", "manifest"}
        assert inst.reason and inst.needs


def test_an_eval_and_the_divergence_check_narrowed_by_points_run_only_there(tmp_path):
    # The frozen mini-k3 copy resolves its data paths from the repository root: keep it there.
    text = MINI.read_text()
    text = text.replace(
        "  - id: mrcr\n    task: mrcr_local\n",
        "  - id: mrcr\n    task: mrcr_local\n    points: {tensor_parallel: [1]}\n",
        1,
    )
    text = text.replace(
        "divergence:\n  prompts_from: mrcr\n",
        "divergence:\n  prompts_from: mrcr\n  points: {accelerator: [cpu], tensor_parallel: [1, 4]}\n",
        1,
    )
    narrowed = MINI.with_name("narrowed-tmp-copy.yaml")
    narrowed.write_text(text)
    try:
        result = build_plan(load_manifest(narrowed), machine(), KINDS)
    finally:
        narrowed.unlink()

    def where(kind, name):
        return sorted(
            (i.scope_point.get("accelerator"), i.scope_point.get("tensor_parallel"))
            for i in result.instances
            if i.kind == kind and i.name == name
        )

    assert where("evals", "mrcr") == [("NVIDIA H200", 1), ("cpu", 1)]
    assert where("divergence", "token_kl") == [("cpu", 1), ("cpu", 1), ("cpu", 4), ("cpu", 4)]  # fp32, bf16
    others = [i for i in result.instances if i.kind == "evals" and i.name != "mrcr"]
    assert others and {i.scope_point.get("tensor_parallel") for i in others} == {
        1,
        2,
        4,
    }  # un-narrowed evals: every setup


def test_feature_probes_and_the_speculative_check_narrowed_by_points_run_only_there(tmp_path):
    text = MINI.read_text()
    text = text.replace(
        "    min_acceptance_length: 1.2\n", "    min_acceptance_length: 1.2\n    points: {tensor_parallel: [1]}\n", 1
    )
    text = text.replace(
        "  temperature_sampling: {temperatures: [0.7, 1.0, 1.3], top_p: [1.0, 0.9], samples: 400, alpha: 0.01}\n",
        "  temperature_sampling: {temperatures: [0.7, 1.0, 1.3], top_p: [1.0, 0.9], samples: 400, alpha: 0.01, "
        "points: {accelerator: [cpu], tensor_parallel: [1, 2]}}\n",
        1,
    )
    narrowed = MINI.with_name("narrowed-probes-tmp-copy.yaml")
    narrowed.write_text(text)
    try:
        manifest = load_manifest(narrowed)
        result = build_plan(manifest, machine(), KINDS)
    finally:
        narrowed.unlink()

    def where(kind, name):
        return sorted(
            (i.scope_point.get("accelerator"), i.scope_point.get("tensor_parallel"))
            for i in result.instances
            if i.kind == kind and i.name == name
        )

    assert where("features", "temperature_sampling") == [("cpu", 1), ("cpu", 2)]
    assert (
        "points" not in next(p for p in manifest.features if p.name == "temperature_sampling").settings
    )  # not a probe setting
    assert where("features", "stop_strings") == [("NVIDIA H200", 1), ("cpu", 1), ("cpu", 2), ("cpu", 4)]  # un-narrowed
    spec = [i for i in result.instances if i.kind == "speculative"]
    assert {(i.scope_point.get("tensor_parallel"), i.scope_point.get("draft_length")) for i in spec} == {
        (1, d) for d in range(1, 8)
    }
    assert len(spec) == 14  # 7 draft lengths on cpu and on the H200, TP 1 only


def test_a_census_metric_on_servers_without_the_profiler_is_never_planned_as_runnable():
    import copy
    from dataclasses import replace

    from fasttrack.manifest.sections import freeze

    manifest = load_manifest(REPO / "tests/fixtures/manifests/valid/kernel-micro-benchmarks.yaml")
    planned = [i for i in build_plan(manifest, machine(1), KINDS).instances if i.kind == "benchmarks"]
    assert planned and all("profiler" not in (i.reason or "") for i in planned)
    data = copy.deepcopy(manifest.data)
    del data["target"]["vllm"]["serve_args"]  # validate refuses this manifest; the planner too
    unprofiled = replace(manifest, frozen_data=freeze(data))
    refused = [i for i in build_plan(unprofiled, machine(1), KINDS).instances if i.kind == "benchmarks"]
    assert refused and all(not i.runnable and i.reason_code == "dependency" for i in refused)
    assert "the baseline and candidate servers have none" in (refused[0].reason or "")
