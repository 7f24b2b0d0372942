"""--hardware: a run narrowed to some accelerators' scope points, and `fasttrack merge` of runs made
on different machines (a CPU runner and an H200 machine) into the full-scope verdict."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fasttrack.cli.options import parse_hardware
from fasttrack.engine.merge import merge_dirs
from fasttrack.engine.run import CheckOptions, run_check
from fasttrack.errors import UsageError
from fasttrack.evidence import read_evidence_dict
from fasttrack.kinds.base import Kinds
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest.scope import ScopePoint
from fasttrack.plan import CheckInstance
from fasttrack.report.summary import summary_text
from fasttrack.selection import Selection, hardware_exclusions, resolve_hardware
from support.fake_kinds import fake_kinds
from support.projects import materialise

H200 = "NVIDIA H200"
PASS_RUNNER = (
    "ISOLATION = 'inprocess'\ndef run(instance, context):\n    return context.outcome(instance, Status.PASSED)\n"
)
FAIL_RUNNER = (
    "ISOLATION = 'inprocess'\ndef run(instance, context):\n"
    "    return context.outcome(instance, Status.FAILED, reason_code='mismatch', reason='planted')\n"
)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """The fault fixtures' base project with a second hardware entry (one H200) in its scope."""
    folder = tmp_path / "runners"
    folder.mkdir()
    for name, body in (("ft_hw_pass", PASS_RUNNER), ("ft_hw_fail", FAIL_RUNNER)):
        (folder / f"{name}.py").write_text("from fasttrack.evidence import Status\n" + textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(folder))
    root = tmp_path / "p"
    materialise(root)
    manifest = root / "fasttrack.yaml"
    text = manifest.read_text()
    cpu_line = "    - {accelerator: cpu, device_counts: [1], tensor_parallel: [1]}\n"
    assert cpu_line in text
    manifest.write_text(
        text.replace(cpu_line, cpu_line + f"    - {{accelerator: {H200}, device_counts: [1], tensor_parallel: [1]}}\n")
    )
    return root


def use_plan(runnable_here: set[str], runner: str = "ft_hw_pass", failing_h200: bool = False) -> Kinds:
    """A plan of one global check and, per accelerator, two checks at its scope point; those on
    accelerators in ``runnable_here`` are runnable (the machine the run pretends to be).
    ``failing_h200``: the stress check fails (only the H200 run runs it, under --hardware)."""
    runners = {"scope_diff": runner, "kernels": runner, "stress": "ft_hw_fail" if failing_h200 else runner}
    instances = [
        CheckInstance(
            "scope_diff/code_paths", "scope_diff", "code_paths", None, True, True, None, None, None, 1.0, 10.0
        )
    ]
    for accelerator in ("cpu", H200):
        point = ScopePoint.of({"accelerator": accelerator, "device_count": 1, "tensor_parallel": 1})
        here = accelerator in runnable_here
        for kind in ("kernels", "stress"):
            instances.append(
                CheckInstance(
                    f"{kind}/t@{point.id}",
                    kind,
                    "t",
                    point,
                    True,
                    here,
                    None if here else "hardware",
                    None if here else f"needs {accelerator} x1; this machine has: cpu",
                    None,
                    1.0,
                    10.0,
                )
            )
    return fake_kinds(instances, runners)


def go(project, out: Path, *hardware: str, kinds: Kinds, only: tuple[str, ...] = ()):
    options = CheckOptions(
        manifest=str(project / "fasttrack.yaml"),
        out_dir=out,
        quiet=True,
        selection=Selection(only=only, hardware=parse_hardware(hardware)),
    )
    result = run_check(options, kinds)
    return result, read_evidence_dict(out)  # schema-validated


def by_id(evidence):
    return {c["id"]: c for c in evidence["checks"]}


def test_parse_and_resolve_hardware_names():
    declared = ["cpu", H200]
    assert parse_hardware(["cpu", "nvidia-h200, CPU"]) == ("cpu", "nvidia-h200", "CPU")
    # Case, hyphens and the NVIDIA prefix are ignored; results are in the manifest's spelling.
    assert resolve_hardware(("CPU", "h200"), declared, lambda _: 0) == ("cpu", H200)
    assert resolve_hardware(("here",), declared, lambda name: 1 if name == H200 else 0) == ("cpu", H200)
    assert resolve_hardware(("here",), declared, lambda _: 0) == ("cpu",)
    with pytest.raises(
        UsageError, match=r"'GB300' is not an accelerator the manifest's scope declares; declared: 'cpu', 'NVIDIA H200'"
    ):
        resolve_hardware(("GB300",), declared, lambda _: 0)
    with pytest.raises(UsageError, match="this machine has none of the declared accelerators"):
        resolve_hardware(("here",), [H200], lambda _: 0)


def test_cpu_selection_passes_and_names_what_it_left_out(project, tmp_path, monkeypatch):
    kinds = use_plan(runnable_here={"cpu"})
    # Without --hardware the H200 points are required and not runnable here: INCOMPLETE.
    whole, _ = go(project, tmp_path / "all", kinds=kinds)
    assert whole.exit_code == 3
    result, evidence = go(project, tmp_path / "cpu", "CPU", kinds=kinds)
    assert (result.exit_code, evidence["verdict"]["status"]) == (0, "PASS")
    assert evidence["run"]["hardware"] == ["cpu"]
    checks = by_id(evidence)
    h200 = [c for c in checks.values() if (c["scope_point"] or {}).get("accelerator") == H200]
    assert len(h200) == 2 and all(
        c["status"] == "not_run" and c["reason_code"] == "out_of_scope" and not c["required"] for c in h200
    )
    assert "NVIDIA H200 excluded by --hardware cpu" in h200[0]["reason"]
    assert checks["scope_diff/code_paths"]["status"] == "passed" and checks["scope_diff/code_paths"]["required"]
    assert hardware_exclusions(evidence["run"], evidence["checks"]) == {H200: {"kernels/t": 1, "stress/t": 1}}
    head, *rest = summary_text(result.evidence, KINDS).splitlines()
    assert head.endswith("PASS for hardware cpu (excluded hardware: NVIDIA H200)")
    assert "    NVIDIA H200: 2 outcomes: kernels/t, stress/t" in rest


def test_merge_of_cpu_and_h200_runs_is_the_full_scope_verdict(project, tmp_path, monkeypatch):
    kinds = use_plan(runnable_here={"cpu"})
    go(project, tmp_path / "cpu", "cpu", kinds=kinds)
    kinds = use_plan(runnable_here={H200})  # the H200 machine
    result, h200 = go(project, tmp_path / "h200", H200, kinds=kinds)
    assert result.exit_code == 0 and h200["run"]["hardware"] == [H200]

    merged = merge_dirs([tmp_path / "cpu", tmp_path / "h200"], tmp_path / "m")
    summary = summary_text(merged, KINDS)
    assert merged.verdict.status.value == "PASS" and merged.run.hardware == ()
    assert all(c.required and c.status.value == "passed" for c in merged.checks)
    assert len(merged.checks) == 5 and "excluded" not in summary

    # The CPU run alone, merged: the H200 points are required again and name what is missing.
    alone = merge_dirs([tmp_path / "cpu"], tmp_path / "m1")
    summary = summary_text(alone, KINDS)
    assert alone.verdict.status.value == "INCOMPLETE"
    missing = [c for c in alone.checks if c.required and c.status.value == "not_run"]
    assert {c.id.split("@")[0] for c in missing} == {"kernels/t", "stress/t"}
    assert all("no merged run covered NVIDIA H200 (--hardware cpu)" in c.reason for c in missing)
    # ...unless the merge itself is narrowed to cpu: then it is a labelled partial PASS.
    narrowed = merge_dirs([tmp_path / "cpu"], tmp_path / "m2", hardware=("cpu",))
    summary = summary_text(narrowed, KINDS)
    assert narrowed.verdict.status.value == "PASS" and narrowed.run.hardware == ("cpu",)
    assert "excluded hardware: NVIDIA H200" in summary.splitlines()[0]


def test_merge_keeps_a_failure_from_either_machine(project, tmp_path, monkeypatch):
    kinds = use_plan(runnable_here={"cpu"})
    go(project, tmp_path / "cpu", "cpu", kinds=kinds)
    kinds = use_plan(runnable_here={H200}, failing_h200=True)
    go(project, tmp_path / "h200", H200, kinds=kinds)
    merged = merge_dirs([tmp_path / "cpu", tmp_path / "h200"], tmp_path / "m")
    assert merged.verdict.status.value == "FAIL"
    failed = [c.id for c in merged.checks if c.status.value == "failed"]
    assert failed == [f"stress/t@accelerator={H200},device_count=1,tensor_parallel=1"]


def test_merge_prefers_a_run_over_not_runnable_here(project, tmp_path, monkeypatch):
    """A CPU run without --hardware records the H200 points as not_run(hardware); the H200
    machine's result replaces them in the merge."""
    kinds = use_plan(runnable_here={"cpu"})
    go(project, tmp_path / "cpu", kinds=kinds)
    kinds = use_plan(runnable_here={H200})
    go(project, tmp_path / "h200", H200, kinds=kinds)
    merged = merge_dirs([tmp_path / "cpu", tmp_path / "h200"], tmp_path / "m")
    assert merged.verdict.status.value == "PASS"


def test_unknown_hardware_is_a_usage_error(project, tmp_path, monkeypatch):
    kinds = use_plan(runnable_here={"cpu"})
    with pytest.raises(UsageError, match="--hardware: 'GB300'"):
        go(project, tmp_path / "x", "GB300", kinds=kinds)


def test_merge_of_a_global_check_run_twice_keeps_the_worse_outcome(project, tmp_path, monkeypatch):
    kinds = use_plan(runnable_here={"cpu"})
    go(project, tmp_path / "cpu", "cpu", kinds=kinds)
    kinds = use_plan(runnable_here={H200}, runner="ft_hw_fail")  # code confinement fails on the H200 machine
    go(project, tmp_path / "h200", H200, kinds=kinds)
    merged = merge_dirs([tmp_path / "cpu", tmp_path / "h200"], tmp_path / "m")
    outcome = {c.id: c for c in merged.checks}["scope_diff/code_paths"]
    assert (outcome.status.value, outcome.reason) == ("failed", "planted")
