"""Engine scope dimensions (scope.engine, decode-context / expert parallelism, compute
capability): expanded into scope points and deployments, rendered into commands, narrowed by
points, planned per deployment, shown in the plan, the heatmap and the dashboard."""

from __future__ import annotations

from pathlib import Path

from fasttrack.environment import Accelerator, Environment
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.plan import build_plan
from fasttrack.report.dashboard import engine_dimensions
from fasttrack.report.view import build_view
from fasttrack.targets.openai.side import server_spec
from fasttrack.targets.python.factory import factory_options
from support import evidence_fixtures

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures/manifests/valid/engine-dimensions.yaml"


def b300(count: int = 4, capability: str | None = "10.3") -> Environment:
    gpus = tuple(Accelerator(i, "NVIDIA B300 SXM6", 288 * 2**30, capability) for i in range(count))
    return Environment("NVIDIA B300 SXM6", gpus, "test", "nvlink", "cpu", 64, "Linux", "3.11")


def test_engine_dimensions_are_scope_dimensions_and_make_deployments():
    m = load_manifest(FIXTURE)
    assert m.scope.engine_values() == {
        "kv_cache_dtype": ("fp8_e4m3", "auto"),
        "attention_backend": ("FLASHINFER_MLA",),
        "cuda_graph_mode": ("FULL_AND_PIECEWISE",),
        "decode_context_parallel": (1, 2),
    }
    deployments = m.deployments()
    assert len(deployments) == 4  # one hardware setup x 2 KV-cache dtypes x 2 DCP sizes
    assert all(p.get("attention_backend") == "FLASHINFER_MLA" for p in deployments)
    assert len(m.scope_points()) == 4 * 2  # x batch 1, 8 (dtype nvfp4 is one value)
    assert "kv_cache_dtype=fp8_e4m3" in m.scope_points()[0].id or "kv_cache_dtype=auto" in m.scope_points()[0].id
    # a parallelism list of only 1 is no such parallelism: no dimension
    assert "expert_parallel" not in m.scope.engine_values()


def test_commands_take_the_engine_dimensions_by_placeholder():
    m = load_manifest(FIXTURE)
    point = next(
        p for p in m.deployments() if p.get("kv_cache_dtype") == "fp8_e4m3" and p.get("decode_context_parallel") == 2
    )
    command = server_spec(m, "candidate", point.as_dict()).command
    assert command[command.index("--kv-cache-dtype") + 1] == "fp8_e4m3"
    assert command[command.index("-dcp") + 1] == "2"
    assert command[command.index("--attention-backend") + 1] == "FLASHINFER_MLA"
    assert '{"cudagraph_mode": "FULL_AND_PIECEWISE"}' in command  # inside JSON, only {name} tokens are replaced


def test_checks_run_per_deployment_and_points_narrow_them():
    plan = build_plan(load_manifest(FIXTURE), b300(), KINDS)
    switch = [i for i in plan.instances if i.kind == "switch"]
    assert len(switch) == 4 and {i.reason_code for i in switch} == {"target"}  # tiny-server is not installed here
    evals = [i for i in plan.instances if i.kind == "evals"]
    assert [(i.scope_point.get("kv_cache_dtype"), i.scope_point.get("decode_context_parallel")) for i in evals] == [
        ("fp8_e4m3", 2)
    ]
    kernels = {
        i.scope_point.get("kv_cache_dtype")
        for i in plan.instances
        if i.kind == "kernels" and not i.name.endswith(":between")  # the sizes between points: per hardware setup
    }
    assert kernels == {"fp8_e4m3", "auto"}  # covers: [batch, kv_cache_dtype]
    data = plan.to_dict()
    assert data["dimensions"]["kv_cache_dtype"] == ["fp8_e4m3", "auto"]
    assert {"kv_cache_dtype", "attention_backend", "decode_context_parallel"} <= set(data["deployments"][0])


def test_a_python_target_is_told_the_engine_dimensions_or_cannot_run_them(tmp_path):
    text = FIXTURE.read_text().split("target:")[0] + 'target:\n  kind: python\n  python: {factory: "t:create"}\n'
    text = text.replace('enable: {env: "TINY_FAST=1"}', "enable: {engine_arg: fast_path}")
    path = tmp_path / "fasttrack.yaml"
    path.write_text(text)
    m = load_manifest(path)
    point = next(p for p in m.deployments() if p.get("decode_context_parallel") == 1).as_dict()
    options = factory_options(m, "candidate", point)
    assert options["kv_cache_dtype"] in ("fp8_e4m3", "auto") and options["attention_backend"] == "FLASHINFER_MLA"
    assert options["decode_context_parallel"] == 1


def test_a_compute_capability_is_hardware_the_machine_must_have():
    plan = build_plan(load_manifest(FIXTURE), b300(capability="10.0"), KINDS)
    switch = next(i for i in plan.instances if i.kind == "switch")
    assert switch.reason_code == "hardware"
    assert "needs NVIDIA B300 with compute capability 10.3 (sm_103" in switch.reason and "10.0" in switch.reason
    unknown = build_plan(load_manifest(FIXTURE), b300(capability=None), KINDS)
    assert next(i for i in unknown.instances if i.kind == "switch").reason_code == "hardware"  # unknown: no match


def test_the_heatmap_and_the_dashboard_show_the_engine_dimensions():
    m = load_manifest(FIXTURE)
    evidence = evidence_fixtures.build_evidence("kimi-k3-latency", "pass").to_dict()
    evidence["scope_points"] = [{"id": p.id, "dims": p.as_dict()} for p in m.scope_points()]
    evidence["manifest"]["data"] = m.data
    view = build_view(evidence, "0" * 64, KINDS)
    assert view.heatmap is not None and "kv_cache_dtype=fp8_e4m3" in str(view.heatmap)
    assert engine_dimensions(evidence) == (
        "attention_backend: FLASHINFER_MLA; cuda_graph_mode: FULL_AND_PIECEWISE; "
        "decode_context_parallel: 1, 2; kv_cache_dtype: auto, fp8_e4m3"
    )
