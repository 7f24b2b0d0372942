"""`fasttrack check` on planted-fault projects: each fault gives the right non-PASS verdict with
a precise reason; the clean project passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FAULTS = Path(__file__).resolve().parents[1] / "fixtures" / "faults"
from support.projects import git


def check(
    project: Path, *args: str, out: Path | None = None, timeout: float = 600, reports: bool = False
) -> tuple[int, dict, str]:
    out = out or project.parent / f"{project.name}-out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fasttrack",
            "check",
            "fasttrack.yaml",
            "--out",
            str(out),
            *([] if reports else ["--no-reports"]),
            *args,
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    evidence = json.loads((out / "evidence.json").read_text()) if (out / "evidence.json").exists() else {}
    return done.returncode, evidence, done.stdout + done.stderr


def outcomes(evidence: dict, kind: str) -> dict[str, dict]:
    return {c["scope_point_id"] or c["id"]: c for c in evidence["checks"] if c["kind"] == kind}


def valid(evidence: dict) -> None:
    from fasttrack.evidence import validate_evidence_dict

    validate_evidence_dict(evidence)


def test_clean_project_passes_the_selected_kinds(tmp_path, project):
    code, evidence, text = check(project, "--base", "HEAD", "--only", "scope,switch,kernels,stress", reports=True)
    valid(evidence)
    assert code == 0, text
    out = tmp_path / "p-out"
    assert (out / "summary.txt").read_text().startswith("fasttrack toy-fast-path: PASS for the selected kinds")
    assert (out / "report.html").exists() and f"reports: {out / 'report.html'}" in text
    assert evidence["verdict"]["status"] == "PASS"
    assert evidence["run"]["state"] == "complete"
    assert "PASS for the selected kinds scope_diff, switch, kernels, stress" in text
    kernels = outcomes(evidence, "kernels")
    assert sorted(kernels) == [
        "accelerator=cpu,batch=1,device_count=1",
        "accelerator=cpu,batch=17,device_count=1",
        "accelerator=cpu,batch=32,device_count=1",
        "accelerator=cpu,device_count=1",  # the batch sizes between the declared points (<suite>:between)
    ]
    between = kernels["accelerator=cpu,device_count=1"]
    assert between["name"].endswith(":between") and between["status"] == "passed"
    assert between["measurements"]["batch_sizes"]["ran"] == [b for b in range(1, 33) if b not in (1, 17, 32)]
    test = kernels["accelerator=cpu,batch=17,device_count=1"]["measurements"]["tests"][0]
    assert test["tolerance"] == {"atol": 1e-05, "rtol": 1.3e-06} and test["worst_error"]["abs"] == 0.0
    # Artifacts are referenced by sha256 and exist beside the evidence.
    artifact = kernels["accelerator=cpu,batch=1,device_count=1"]["artifacts"][0]
    assert (tmp_path / "p-out" / artifact["path"]).stat().st_size == artifact["bytes"]


def test_kernel_test_failing_only_at_batch_17_fails_there(make_project):
    code, evidence, text = check(make_project("fails_at_17"), "--only", "kernels")
    valid(evidence)
    assert code == 1 and evidence["verdict"]["status"] == "FAIL"
    kernels = outcomes(evidence, "kernels")
    bad = kernels["accelerator=cpu,batch=17,device_count=1"]
    assert bad["status"] == "failed" and "test_row_sums[batch=17]" in bad["reason"] and "atol=1e-05" in bad["reason"]
    assert kernels["accelerator=cpu,batch=1,device_count=1"]["status"] == "passed"
    assert kernels["accelerator=cpu,batch=32,device_count=1"]["status"] == "passed"


def test_segfaulting_kernel_test_is_an_error_naming_the_test(make_project):
    code, evidence, text = check(make_project("segfault"), "--only", "kernels")
    valid(evidence)
    assert code == 3 and evidence["verdict"]["status"] == "INCOMPLETE"
    bad = outcomes(evidence, "kernels")["accelerator=cpu,batch=17,device_count=1"]
    assert bad["status"] == "errored" and bad["reason_code"] == "crashed"
    assert "SIGSEGV" in bad["reason"] and "test_row_sums[batch=17]" in bad["reason"]


@pytest.mark.slow
def test_hanging_kernel_test_is_killed_at_its_timeout(make_project):
    # The suite's limit (20 s) leaves a loaded host's pytest time to start and reach the hanging test.
    code, evidence, text = check(make_project("hang"), "--only", "kernels", timeout=600)
    valid(evidence)
    assert code == 3
    bad = outcomes(evidence, "kernels")["accelerator=cpu,batch=17,device_count=1"]
    assert bad["status"] == "errored" and bad["reason_code"] == "timeout"
    assert "timeout of 20s" in bad["reason"] and "test_row_sums[batch=17]" in bad["reason"]


def test_scope_point_no_test_covers_is_not_run_uncovered(make_project):
    code, evidence, text = check(make_project("uncovered_point"), "--only", "kernels")
    valid(evidence)
    assert code == 3
    kernels = outcomes(evidence, "kernels")
    gap = kernels["accelerator=cpu,batch=32,device_count=1"]
    assert gap["status"] == "not_run" and gap["reason_code"] == "uncovered"
    assert "no passing kernel test exercised batch at accelerator=cpu,batch=32,device_count=1" in gap["reason"]
    assert "batch=32" in text  # the summary names the point
    assert kernels["accelerator=cpu,batch=17,device_count=1"]["status"] == "passed"


def test_changed_file_outside_code_paths_fails_confinement(project):
    (project / "setup.cfg").write_text("[metadata]\n")
    (project / "toy" / "extra.py").write_text("X = 1\n")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "touch a file outside the model's code")
    code, evidence, text = check(project, "--only", "scope", "--base", "HEAD~1")
    valid(evidence)
    assert code == 1
    (scope,) = outcomes(evidence, "scope_diff").values()
    assert scope["status"] == "failed" and scope["reason_code"] == "outside_code_paths"
    assert scope["measurements"]["violations"] == [
        {"path": "setup.cfg", "reason": "outside model.code_paths and model.allowed_paths"}
    ]
    assert sorted(scope["measurements"]["changed"]) == ["setup.cfg", "toy/extra.py"]
    assert evidence["git"]["changed_files"] == ["setup.cfg", "toy/extra.py"]

    diff = subprocess.run(
        [sys.executable, "-m", "fasttrack", "diff-scope", "fasttrack.yaml", "--base", "HEAD~1"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert diff.returncode == 1 and "  setup.cfg" in diff.stdout and "toy/extra.py" not in diff.stdout
    same = subprocess.run(
        [sys.executable, "-m", "fasttrack", "diff-scope", "fasttrack.yaml", "--base", "HEAD"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert same.returncode == 0, same.stdout + same.stderr
    # Without --base: the merge-base with main (docs/cli.md); on a branch off it, that is the fork point.
    git(project, "branch", "-q", "-m", "main", "work")
    git(project, "branch", "-q", "main", "HEAD~1")
    default = subprocess.run(
        [sys.executable, "-m", "fasttrack", "diff-scope", "fasttrack.yaml"], cwd=project, capture_output=True, text=True
    )
    assert default.returncode == 1 and "  setup.cfg" in default.stdout, default.stdout + default.stderr
    # No branch to default to: a usage error that says to pass --base.
    git(project, "branch", "-q", "-D", "main")
    nobase = subprocess.run(
        [sys.executable, "-m", "fasttrack", "diff-scope", "fasttrack.yaml"], cwd=project, capture_output=True, text=True
    )
    assert nobase.returncode == 2 and "--base" in nobase.stderr and "Traceback" not in nobase.stderr


@pytest.mark.parametrize(
    ("fault", "exit_code", "status", "code", "words"),
    [
        (
            "switch_default_on",
            1,
            "failed",
            "switch_default_on",
            "with default settings the optimised path 'fast_path' ran",
        ),
        ("path_never_exercised", 1, "failed", "path_not_exercised", "never ran at batch 1, 17, 32"),
        ("missing_dependency", 3, "not_run", "dependency", "needs the Python module 'toy_accelerated_kernels'"),
    ],
)
def test_switch_and_proof_of_path_faults(make_project, fault, exit_code, status, code, words):
    rc, evidence, text = check(make_project(fault), "--only", "switch")
    valid(evidence)
    assert rc == exit_code, text
    (switch,) = outcomes(evidence, "switch").values()
    assert (switch["status"], switch["reason_code"]) == (status, code)
    assert words in switch["reason"]


def test_missing_dependency_of_kernel_tests_is_not_run_dependency(make_project):
    rc, evidence, text = check(make_project("missing_dependency"), "--only", "kernels")
    valid(evidence)
    assert rc == 3
    kernels = list(outcomes(evidence, "kernels").values())
    # the three declared points and the sizes between them: none can run without the module
    assert len(kernels) == 4 and all((k["status"], k["reason_code"]) == ("not_run", "dependency") for k in kernels)
    assert (
        kernels[0]["reason"]
        == "the kernel tests need the Python module 'toy_accelerated_kernels', which is not installed here"
    )


def test_racy_result_fails_the_stress_audit(make_project):
    rc, evidence, text = check(make_project("racy_stress"), "--only", "stress")
    valid(evidence)
    assert rc == 1
    (stress,) = outcomes(evidence, "stress").values()
    assert stress["status"] == "failed" and stress["reason_code"] == "mismatch"
    assert "test_stress gave 2 distinct results over 4 repeats" in stress["reason"]


def test_bad_input_exits_2_without_traceback(tmp_path, project):
    for args in (["missing.yaml"], ["fasttrack.yaml", "--only", "nonsense"], ["fasttrack.yaml", "--shard", "3/2"]):
        done = subprocess.run(
            [sys.executable, "-m", "fasttrack", "check", *args, "--out", str(tmp_path / "o")],
            cwd=project,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 2, args
        assert "Traceback" not in done.stderr and "error:" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "exit_code", "status"), [("openai_server", 0, "passed"), ("openai_server_ignores_flag", 1, "failed")]
)
def test_proof_of_path_from_server_metrics(make_project, fault, exit_code, status):
    rc, evidence, text = check(make_project(fault), "--only", "switch")
    valid(evidence)
    assert rc == exit_code, text
    (switch,) = outcomes(evidence, "switch").values()
    assert switch["status"] == status
    m = switch["measurements"]
    assert m["default_path_counts"] == {"stock": 200.0}  # 4 tokens x (1 + 17 + 32) requests
    if status == "failed":
        assert switch["reason_code"] == "path_not_exercised" and "never ran at batch 1, 17, 32" in switch["reason"]
    else:
        assert m["candidate_path_counts"] == {"fast_path": 200.0}
    assert {a["description"] for a in switch["artifacts"]} >= {"baseline server log", "candidate server log"}
