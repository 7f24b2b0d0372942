"""The checks that compare numerics end to end (divergence, the full-context probe) run once per
dtype the scope declares (issue #34 part 2): their points carry the dtype, the in-process factory
is called with it, and a server that cannot be told a dtype does not pretend to serve it."""

from __future__ import annotations

from pathlib import Path

from fasttrack.environment import Accelerator, Environment
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.plan import build_plan
from fasttrack.targets.python.factory import factory_options
from fasttrack.targets.registry import TARGET_KINDS

REPO = Path(__file__).resolve().parents[3]
MINI = REPO / "tests/fixtures/manifests/valid/cpu-and-h200.yaml"  # scope dtypes [fp32, bf16]
OPENAI = REPO / "tests/fixtures/manifests/valid/openai-target.yaml"
CPU = Environment("cpu", (), "test", "loopback", "Test CPU", 2, "Linux", "3.11")


def openai_manifest(tmp_path: Path, dtypes: str, command_extra: str = "") -> Path:
    text = OPENAI.read_text().replace(
        "  batch: {min: 1, max: 16}\n", f"  batch: {{min: 1, max: 16}}\n  dtypes: {dtypes}\n"
    )
    text = text.replace('--port, "{port}"]}', f'--port, "{{port}}"{command_extra}]}}')
    text = text.replace('--port, "{port}", --fast-path]}', f'--port, "{{port}}", --fast-path{command_extra}]}}')
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return path


def test_divergence_and_full_context_run_at_every_declared_dtype_the_other_checks_do_not():
    plan = build_plan(load_manifest(MINI), CPU, KINDS)
    cpu = [i for i in plan.instances if i.scope_point is not None and i.scope_point.get("accelerator") == "cpu"]

    def dtypes(kind: str, name: str) -> list:
        return [
            (i.scope_point.get("tensor_parallel"), i.scope_point.get("dtype"))
            for i in cpu
            if (i.kind, i.name) == (kind, name)
        ]

    assert dtypes("divergence", "token_kl") == [(tp, d) for tp in (1, 2, 4) for d in ("fp32", "bf16")]
    assert dtypes("features", "full_context") == [(tp, d) for tp in (1, 2, 4) for d in ("fp32", "bf16")]
    assert all(i.runnable for i in cpu if i.kind == "divergence")
    assert "divergence/token_kl@accelerator=cpu,device_count=1,dtype=bf16,tensor_parallel=1" in {i.id for i in cpu}
    # a probe whose numerics do not depend on the position stays at the target's own dtype
    assert dtypes("features", "temperature_sampling") == [(tp, None) for tp in (1, 2, 4)]
    assert dtypes("evals", "mrcr") == [(tp, None) for tp in (1, 2, 4)]


def test_the_in_process_factory_is_told_the_points_dtype():
    m = load_manifest(MINI)
    point = {"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1, "dtype": "bf16"}
    assert factory_options(m, "candidate", point)["dtype"] == "bf16"


def test_a_server_that_starts_the_same_way_at_every_dtype_cannot_run_a_dtype_point(tmp_path):
    kind = TARGET_KINDS["openai"]
    point = {"accelerator": "NVIDIA H200", "device_count": 1, "tensor_parallel": 1, "dtype": "bf16"}
    several = load_manifest(openai_manifest(tmp_path, "[fp32, bf16]"))
    reason = kind.unservable(several, point)
    assert reason is not None and "starts the same way at every dtype the scope declares (fp32, bf16)" in reason
    assert kind.unservable(several, {k: v for k, v in point.items() if k != "dtype"}) is None
    # one declared dtype: the server's serve args are the author's statement of it
    one = load_manifest(openai_manifest(tmp_path, "[bf16]"))
    assert kind.unservable(one, point) is None
    # a command that changes with the dtype starts one server per dtype
    told = load_manifest(openai_manifest(tmp_path, "[fp32, bf16]", ', --dtype, "{dtype}"'))
    assert kind.unservable(told, point) is None
    assert TARGET_KINDS["python"].unservable(several, point) is None


def test_the_plan_says_why_a_dtype_point_of_such_a_server_does_not_run(tmp_path, monkeypatch):
    from fasttrack.plan import planner

    monkeypatch.setattr(planner, "target_blocker", lambda manifest, targets: None)  # as if tiny-server were here
    h200 = tuple(Accelerator(i, "NVIDIA H200", 141 * 2**30) for i in range(2))
    gpu = Environment("NVIDIA H200", h200, "test", "nvlink", "Test CPU", 2, "Linux", "3.11")
    plan = build_plan(load_manifest(openai_manifest(tmp_path, "[fp32, bf16]")), gpu, KINDS)
    full = [i for i in plan.instances if i.name == "full_context"]
    assert len(full) == 3 * 2  # three hardware setups x two dtypes
    assert all(not i.runnable and i.reason_code == "target" for i in full)
    assert all("nothing says which" in str(i.reason) for i in full)
    others = [i for i in plan.instances if i.kind == "features" and i.name != "full_context"]
    assert others and all(i.runnable for i in others)
