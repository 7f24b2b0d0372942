"""The planner's "runnable here or exactly why not" for the hardware vocabulary of issue #36
item 7: AMD gfx targets, xGMI, and "compute capability at least X"."""

from __future__ import annotations

from pathlib import Path

from fasttrack.environment import Accelerator, Environment
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.plan import build_plan

REPO = Path(__file__).resolve().parents[3]
AMD = REPO / "tests/fixtures/manifests/valid/amd-instinct-and-blackwell.yaml"


def machine(name: str, count: int, link: str, arch: str | None = None, cc: str | None = None) -> Environment:
    gpus = tuple(Accelerator(i, name, None, cc, arch) for i in range(count))
    return Environment(gpus[0].name if gpus else "cpu", gpus, "test", link, "cpu", 64, "Linux", "3.11")


def switch_at(env: Environment, accelerator: str):
    plan = build_plan(load_manifest(AMD), env, KINDS)
    (found,) = [
        i
        for i in plan.instances
        if i.kind == "switch"
        and i.scope_point.get("accelerator") == accelerator
        and i.scope_point.get("decode_context_parallel", 1) == 1
    ]
    return found


def test_an_mi355x_machine_runs_its_entry_and_not_the_mi300x_one():
    env = machine("AMD Instinct MI355X OAM", 8, "xgmi", arch="gfx950")
    assert switch_at(env, "AMD Instinct MI355X").reason_code != "hardware"
    mi300 = switch_at(env, "AMD Instinct MI300X")
    assert mi300.reason_code == "hardware" and "needs AMD Instinct MI300X x8 over xgmi" in mi300.reason


def test_another_gfx_target_or_none_reported_is_not_run_with_both_named():
    wrong = switch_at(machine("AMD Instinct MI355X", 8, "xgmi", arch="gfx942"), "AMD Instinct MI355X")
    assert wrong.reason_code == "hardware" and wrong.needs == "AMD Instinct MI355X gfx950"
    assert "of architecture gfx950 (scope hardware entry 1); this machine's are: gfx942" in wrong.reason
    unknown = switch_at(machine("AMD Instinct MI355X", 8, "xgmi"), "AMD Instinct MI355X")
    assert "this machine's are: unknown (neither ROCm's torch nor rocm-smi named one)" in unknown.reason


def test_gpus_over_pcie_cannot_run_an_xgmi_entry():
    found = switch_at(machine("AMD Instinct MI355X", 8, "pcie", arch="gfx950"), "AMD Instinct MI355X")
    assert found.reason_code == "hardware" and found.needs == "AMD Instinct MI355X x8 over xgmi"
    assert "linked by xGMI (scope hardware entry 1); this machine's GPUs are linked by pcie" in found.reason


def test_compute_capability_at_least():
    assert switch_at(machine("NVIDIA B200", 8, "nvlink", cc="10.0"), "NVIDIA B200").reason_code != "hardware"
    assert switch_at(machine("NVIDIA B200", 8, "nvlink", cc="10.3"), "NVIDIA B200").reason_code != "hardware"
    older = switch_at(machine("NVIDIA B200", 8, "nvlink", cc="9.0"), "NVIDIA B200")
    assert older.reason_code == "hardware" and older.needs == "NVIDIA B200 >= sm_100"
    assert (
        "compute capability >= 10.0 (at least sm_100, scope hardware entry 3); this machine's are: 9.0" in older.reason
    )
    unknown = switch_at(machine("NVIDIA B200", 8, "nvlink"), "NVIDIA B200")
    assert "this machine's are: unknown (no GPU query answered)" in unknown.reason


def test_a_machine_with_none_of_these_says_what_each_entry_needs():
    plan = build_plan(load_manifest(AMD), machine("cpu", 0, "loopback"), KINDS)
    reasons = {i.reason for i in plan.instances if i.kind == "switch"}
    assert {i.reason_code for i in plan.instances if i.kind == "switch"} == {"hardware"}
    assert any(r.startswith("needs AMD Instinct MI355X x8 over xgmi (scope hardware entry 1)") for r in reasons)
    assert any(
        r.startswith("needs NVIDIA B200 x8 over nvlink in one NVLink domain (scope hardware entry 3)") for r in reasons
    )
    assert all("this machine has: cpu (64 cores), no GPU" in r for r in reasons)


def test_hardware_selection_takes_amd_names_as_loosely_as_nvidia_ones():
    from fasttrack.selection import resolve_hardware

    declared = [entry.accelerator for entry in load_manifest(AMD).scope.hardware]
    chosen = resolve_hardware(["MI355X", "amd-instinct-mi300x", "b200"], declared, lambda _name: 0)
    assert chosen == ("AMD Instinct MI355X", "AMD Instinct MI300X", "NVIDIA B200")
