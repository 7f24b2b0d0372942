"""`fasttrack plan`: the Kimi K3 manifest cannot run here, and the plan says exactly why."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fasttrack.cli import main
from fasttrack.environment import detect_environment

REPO = Path(__file__).resolve().parents[2]
KIMI = REPO / "examples/kimi-k3-latency/fasttrack.yaml"
MINI = REPO / "examples/mini-k3/fasttrack.yaml"


def run_cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            main(list(args))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, out.getvalue()


@pytest.fixture(scope="module")
def here():
    env = detect_environment()
    if env.count_of("NVIDIA GB300") >= 8:
        pytest.skip("this machine has GB300 GPUs: the Kimi K3 plan is partly runnable here")
    return env


def test_kimi_plan_json_lists_every_check_as_not_runnable_with_reasons(here):
    code, output = run_cli("plan", "--json", str(KIMI))
    assert code == 0
    plan = json.loads(output)
    instances = plan["instances"]
    kinds = {i["kind"] for i in instances}
    assert kinds == {
        "scope_diff",
        "switch",
        "kernels",
        "stress",
        "sanitizer",
        "evals",
        "divergence",
        "features",
        "speculative",
        "benchmarks",
        "claims",
    }
    # Only the claims lint (manifest data, one global instance per claim) runs without GB300s.
    claims = [i for i in instances if i["kind"] == "claims"]
    assert plan["runnable"] == len(claims) == 7 and plan["total"] == len(instances)
    assert all(i["runnable"] and i["scope_point"] is None for i in claims)
    for inst in instances:
        if inst["kind"] == "claims":
            continue
        assert inst["runnable"] is False
        assert inst["reason"], inst["id"]
        if inst["kind"] == "scope_diff":
            assert inst["reason_code"] == "target" and "model.code_paths" in inst["reason"]
            continue
        assert inst["reason_code"] == "hardware", inst
        count = inst["scope_point"]["device_count"]
        assert f"needs NVIDIA GB300 x{count}" in inst["reason"]
        assert f"this machine has: {here.describe()}" in inst["reason"]
    ids = [i["id"] for i in instances]
    assert len(ids) == len(set(ids))
    # decode context parallelism 1 and 2 is a deployment dimension: the evals run at both
    assert "evals/mrcr@accelerator=NVIDIA GB300,decode_context_parallel=2,device_count=16,tensor_parallel=8" in ids


def test_kimi_plan_table_is_grouped_by_kind_with_a_summary(here):
    code, output = run_cli("plan", str(KIMI))
    assert code == 0
    for kind in ("switch", "kernels", "evals", "features", "speculative", "benchmarks"):
        assert f"\n{kind}: 0 of " in output
    assert "NOT RUNNABLE [hardware] needs NVIDIA GB300 x16 over nvlink in one NVLink domain" in output
    assert "this machine has: " in output
    # the summary, then the estimates (one more line where an earlier check here measured costs)
    summary = [line for line in output.splitlines() if line.startswith("7 of ")]
    assert len(summary) == 1 and "missing: hardware: NVIDIA GB300 x16" in summary[0]
    assert output.splitlines().index(summary[0]) >= len(output.splitlines()) - 3
    assert "\nclaims: 7 of 7 runnable here" in output


def test_mini_k3_plan_runs_the_cpu_part_here(here):
    code, output = run_cli("plan", "--json", str(MINI))
    assert code == 0
    plan = json.loads(output)
    cpu = [i for i in plan["instances"] if (i["scope_point"] or {}).get("accelerator") == "cpu"]
    assert cpu and all(i["runnable"] or i["reason_code"] == "dependency" for i in cpu)
    gpu = [i for i in plan["instances"] if (i["scope_point"] or {}).get("accelerator") == "NVIDIA H200"]
    if here.count_of("NVIDIA H200") == 0:
        assert gpu and all(i["reason_code"] == "hardware" for i in gpu)


def test_plan_of_an_invalid_manifest_exits_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("fasttrack: 1\n")
    code, output = run_cli("plan", str(bad))
    assert code == 2 and f"{bad}:1: $: 'optimisation' is a required property" in output


def test_plan_subprocess_smoke(here):
    done = subprocess.run(
        [sys.executable, "-m", "fasttrack", "plan", str(KIMI)], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "runnable here" in done.stdout and "Traceback" not in done.stderr


K26 = REPO / "examples/vllm-kimi-k2.6-b300/fasttrack.yaml"


def test_the_vllm_pr_45452_manifest_validates_and_its_plan_explains_itself():
    code, out = run_cli("validate", str(K26))
    assert code == 0, out
    from fasttrack.manifest import load_manifest

    proofs = {s["name"]: s["proof"]["source"] for s in load_manifest(K26).data["switches"]}
    assert proofs["launch_elision"] == "census"  # fewer launches per layer, seen by the profiler: no counter
    if detect_environment().count_of("NVIDIA B300") >= 4:
        pytest.skip("this machine has four B300 GPUs: the plan is partly runnable here")
    code, out = run_cli("plan", "--json", str(K26))
    assert code == 0, out
    plan = json.loads(out)
    assert plan["runnable"] == 0 and plan["total"] > 20
    points = [i["scope_point"] for i in plan["instances"] if i["scope_point"]]
    assert points and all(
        p["kv_cache_dtype"] == "fp8_e4m3" and p["attention_backend"] == "FLASHINFER_MLA"
        for p in points
        if "tensor_parallel" in p
    )
    assert {i["reason_code"] for i in plan["instances"]} == {"hardware", "target"}
    assert {"decode-latency~launch_elision", "greedy"} <= {i["name"] for i in plan["instances"]}
    code, text = run_cli("plan", str(K26))
    assert "needs NVIDIA B300 x4 over nvlink in one NVLink domain" in text and "engine: kv_cache_dtype fp8_e4m3" in text


K3_RADIX4 = REPO / "examples/sglang-kimi-k3-radix4-topk/fasttrack.yaml"


def test_the_sglang_pr_34490_manifest_validates_and_its_plan_explains_itself():
    code, out = run_cli("validate", str(K3_RADIX4))
    assert code == 0, out
    here = detect_environment()
    if here.count_of("AMD Instinct MI355X") >= 8 or here.count_of("AMD Instinct MI300X") >= 8:
        pytest.skip("this machine has eight AMD Instinct GPUs: the plan is partly runnable here")
    code, out = run_cli("plan", "--json", str(K3_RADIX4))
    assert code == 0, out
    plan = json.loads(out)
    assert plan["runnable"] == 0 and plan["total"] > 20
    assert {i["reason_code"] for i in plan["instances"]} == {"hardware", "target"}
    hardware = [i for i in plan["instances"] if i["reason_code"] == "hardware"]
    deployment = {"AMD Instinct MI355X x8", "AMD Instinct MI300X x8"}
    assert {i["needs"] for i in hardware if i["kind"] != "kernels"} == deployment
    # the router kernel's own tests need one GPU of each architecture (kernel_tests.device_count)
    kernels = [i for i in hardware if i["kind"] == "kernels"]
    assert kernels and {i["needs"].split(" over ")[0] for i in kernels} == {
        "AMD Instinct MI355X x1",
        "AMD Instinct MI300X x1",
    }
    bench = [i for i in plan["instances"] if i["kind"] == "benchmarks"]
    assert bench and all(i["config"]["workload"]["kind"] == "sglang_bench" for i in bench)
    # the kernel tests run on both sides of the kernel's 1,024-token cap
    assert {i["scope_point"]["tokens_per_step"] for i in plan["instances"] if i["kind"] == "kernels"} >= {1024, 1025}
    code, text = run_cli("plan", str(K3_RADIX4))
    assert "needs AMD Instinct MI355X x8 over xgmi" in text and "this machine has" in text
