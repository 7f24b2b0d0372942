"""`fasttrack check --hardware` and `fasttrack merge` as processes, on the toy fixture project
whose scope declares cpu and one NVIDIA H200 (which this machine lacks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
from fasttrack.evidence import validate_evidence_dict
from support.projects import git, materialise

CPU_ENTRY = "    - {accelerator: cpu, device_counts: [1], tensor_parallel: [1]}\n"


def fasttrack(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fasttrack", *args], cwd=cwd, capture_output=True, text=True, timeout=180
    )


def project_with_h200(tmp_path: Path) -> Path:
    root = materialise(tmp_path / "p")
    manifest = root / "fasttrack.yaml"
    manifest.write_text(
        manifest.read_text().replace(
            CPU_ENTRY, CPU_ENTRY + "    - {accelerator: NVIDIA H200, device_counts: [1], tensor_parallel: [1]}\n"
        )
    )
    git(root, "commit", "-q", "-am", "scope: one H200 too")
    return root


def read(out: Path) -> dict:
    data = json.loads((out / "evidence.json").read_text())
    validate_evidence_dict(data)
    return data


@pytest.mark.slow  # ~10-16 s: two real checks and three merges
def test_cpu_selection_passes_here_and_a_merge_without_h200_stays_incomplete(tmp_path):
    project = project_with_h200(tmp_path)
    common = ["check", "fasttrack.yaml", "--no-reports", "-q", "--only", "scope,kernels"]
    whole = fasttrack(*common, "--out", str(tmp_path / "all"), cwd=project)
    assert whole.returncode == 3, whole.stdout + whole.stderr  # the H200 points cannot run here
    cpu = fasttrack(*common, "--hardware", "cpu", "--out", str(tmp_path / "cpu"), cwd=project)
    assert cpu.returncode == 0, cpu.stdout + cpu.stderr
    head = cpu.stdout.splitlines()[0]
    assert head == (
        "fasttrack toy-fast-path: PASS for the selected kinds scope_diff, kernels; excluded: switch, stress, features; "
        "for hardware cpu (excluded hardware: NVIDIA H200)"
    )
    assert "    NVIDIA H200: 4 outcomes: kernels/toy-kernels x3, kernels/toy-kernels:between" in cpu.stdout
    evidence = read(tmp_path / "cpu")
    assert evidence["run"]["hardware"] == ["cpu"] and evidence["verdict"]["status"] == "PASS"

    merged = fasttrack("merge", str(tmp_path / "cpu"), "--no-reports", "--out", str(tmp_path / "m"), cwd=project)
    assert merged.returncode == 3, merged.stdout + merged.stderr
    reasons = read(tmp_path / "m")["verdict"]["reasons"]
    assert (
        sum("no merged run covered NVIDIA H200 (--only scope_diff,kernels, --hardware cpu)" in r for r in reasons) == 4
    )

    partial = fasttrack(
        "merge", "--hardware", "cpu", str(tmp_path / "cpu"), "--no-reports", "--out", str(tmp_path / "mc"), cwd=project
    )
    assert partial.returncode == 0 and "for hardware cpu (excluded hardware: NVIDIA H200)" in partial.stdout
    refused = fasttrack("verify", str(tmp_path / "cpu" / "evidence.json"), cwd=project)
    assert (
        refused.returncode == 3  # intact, but a partial run does not decide
        and "INCOMPLETE whole-scope: partial run (--only scope_diff,kernels, --hardware cpu" in refused.stdout
    )


def test_unknown_accelerator_is_a_one_paragraph_usage_error(tmp_path):
    project = project_with_h200(tmp_path)
    done = fasttrack("check", "fasttrack.yaml", "--hardware", "GB300", "--out", str(tmp_path / "x"), cwd=project)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (
        "--hardware: 'GB300' is not an accelerator the manifest's scope declares; declared: 'cpu', 'NVIDIA H200'"
        in done.stderr
    )
