"""`fasttrack check` as a process: Ctrl-C leaves valid evidence and exit 130, --resume finishes
without redoing completed checks, shards merge into the unsharded result, Kimi K3 here is
INCOMPLETE with one line per missing capability."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAULTS = ROOT / "tests" / "fixtures" / "faults"
from fasttrack.evidence import validate_evidence_dict
from support.interrupts import default_sigint
from support.projects import materialise


def fasttrack(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fasttrack", *args], cwd=cwd, capture_output=True, text=True, timeout=180
    )


def read(out: Path) -> dict:
    data = json.loads((out / "evidence.json").read_text())
    validate_evidence_dict(data)
    return data


def by_id(evidence: dict) -> dict[str, dict]:
    return {c["id"]: c for c in evidence["checks"]}


def wait_for(ready, what: str, proc: subprocess.Popen[str], limit_s: float = 600) -> None:
    """Wait for a readiness signal; the limit only guards against a hang (no timing is assumed)."""
    deadline = time.monotonic() + limit_s
    while not ready():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended (exit {proc.returncode}) before {what}:\n{proc.communicate()[0]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"no sign of {what} after {limit_s:g} s")
        time.sleep(0.05)


def passed_kinds(out: Path) -> set[str]:
    try:
        return {c["kind"] for c in json.loads((out / "evidence.json").read_text())["checks"] if c["status"] == "passed"}
    except (OSError, ValueError):
        return set()


@pytest.mark.slow
def test_sigint_leaves_valid_evidence_and_resume_finishes_the_rest(tmp_path):
    project = materialise(tmp_path / "p", "slow")
    out = tmp_path / "out"
    gate = tmp_path / "gate"  # the kernel tests say here that they run, and wait for "release"
    gate.mkdir()
    env = {**os.environ, "TOY_GATE_DIR": str(gate)}
    args = [
        sys.executable,
        "-m",
        "fasttrack",
        "check",
        "fasttrack.yaml",
        "--out",
        str(out),
        "--no-reports",
        "--base",
        "HEAD",
        "--only",
        "scope,switch,kernels",
    ]
    proc = subprocess.Popen(
        args,
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        preexec_fn=default_sigint,  # the Ctrl-C below must reach it (support.interrupts)
    )
    # The quick checks are recorded and a kernel test is running (held at the gate until released).
    wait_for(
        lambda: {"scope_diff", "switch"} <= passed_kinds(out) and any(gate.glob("running-*")), "a kernel test", proc
    )
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 130, output
    first = read(out)
    assert first["run"]["state"] == "interrupted" and first["verdict"]["status"] == "INCOMPLETE"
    kernels = [c for c in first["checks"] if c["kind"] == "kernels"]
    assert kernels and all(c["status"] == "not_run" and c["reason_code"] == "interrupted" for c in kernels)
    passed_before = {i: c for i, c in by_id(first).items() if c["status"] == "passed"}
    assert {c["kind"] for c in passed_before.values()} == {"scope_diff", "switch"}

    (gate / "release").touch()
    resumed = subprocess.run([*args, "--resume"], cwd=project, capture_output=True, text=True, timeout=600, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    second = read(out)
    assert second["run"]["state"] == "complete" and second["verdict"]["status"] == "PASS"
    for ident, before in passed_before.items():  # reused, not redone: same start time and digest
        after = by_id(second)[ident]
        assert (after["started_at"], after["inputs_digest"]) == (before["started_at"], before["inputs_digest"])
    assert "reused" in resumed.stderr
    assert all(c["status"] == "passed" for c in second["checks"] if c["kind"] == "kernels")


@pytest.mark.slow
def test_shards_merge_to_the_unsharded_result(tmp_path):
    project = materialise(tmp_path / "p", "fails_at_17")
    common = ["check", "fasttrack.yaml", "--no-reports", "--base", "HEAD", "--only", "scope,switch,kernels,stress"]
    whole = fasttrack(*common, "--out", str(tmp_path / "whole"), cwd=project)
    one = fasttrack(*common, "--out", str(tmp_path / "s1"), "--shard", "1/2", cwd=project)
    two = fasttrack(*common, "--out", str(tmp_path / "s2"), "--shard", "2/2", cwd=project)
    assert whole.returncode == 1
    # A shard alone is never the verdict: the other shard's checks are required and not run.
    assert {one.returncode, two.returncode} <= {1, 3} and 3 in {one.returncode, two.returncode}
    only_one = fasttrack("merge", str(tmp_path / "s1"), "--out", str(tmp_path / "half"), "--no-reports", cwd=project)
    assert read(tmp_path / "half")["verdict"]["status"] != "PASS" and only_one.returncode in (1, 3)
    merged = fasttrack(
        "merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "m"), "--no-reports", cwd=project
    )
    assert merged.returncode == whole.returncode, merged.stdout + merged.stderr

    def essence(e: dict) -> list[tuple]:
        return [(c["id"], c["status"], c["reason_code"], c["required"]) for c in e["checks"]]

    w, m = read(tmp_path / "whole"), read(tmp_path / "m")
    assert essence(m) == essence(w)
    assert m["verdict"]["status"] == w["verdict"]["status"] == "FAIL"
    assert m["verdict"]["counts"] == w["verdict"]["counts"]


def test_merge_rejects_shards_of_different_manifests(tmp_path):
    a, b = materialise(tmp_path / "a"), materialise(tmp_path / "b", "hang")
    for project, out in ((a, "ea"), (b, "eb")):
        fasttrack(
            "check", "fasttrack.yaml", "--no-reports", "--only", "scope", "--out", str(tmp_path / out), cwd=project
        )
    done = fasttrack("merge", str(tmp_path / "ea"), str(tmp_path / "eb"), "--out", str(tmp_path / "m"), cwd=a)
    assert done.returncode == 2 and "manifest sha256" in done.stderr


def test_kimi_k3_here_is_incomplete_with_one_line_per_missing_capability(tmp_path):
    done = fasttrack(
        "check", "examples/kimi-k3-latency/fasttrack.yaml", "--no-reports", "-q", "--out", str(tmp_path / "k"), cwd=ROOT
    )
    assert done.returncode == 3, done.stdout + done.stderr
    evidence = read(tmp_path / "k")
    assert evidence["verdict"]["status"] == "INCOMPLETE"
    assert evidence["verdict"]["counts"]["passed"] == 0
    # One line for the missing accelerator, with the count and what this machine has; no instance lines.
    needs = [ln for ln in done.stdout.splitlines() if ln.startswith("  Not on this machine: ")]
    assert len(needs) == 1 and " need NVIDIA GB300 ×8/16 " in needs[0] and "this machine has " in needs[0]
    hardware = [c for c in evidence["checks"] if c["required"] and c["reason_code"] == "hardware"]
    assert needs[0].startswith(f"  Not on this machine: {len(hardware)} outcomes need")
    assert "--hardware 'NVIDIA GB300'" in done.stdout and "evals/" not in done.stdout.split("evidence:")[0]
