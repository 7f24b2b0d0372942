"""`fasttrack check --jobs 2` as a process: the same outcomes as one at a time, checks of the
target really side by side, and Ctrl-C still leaves valid evidence with every worker stopped."""

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
from fasttrack.evidence import validate_evidence_dict
from support.projects import git, materialise

SLOW_TARGET = """
import os, time
from toy.target import ToyTarget

def create(**options):
    # Starting takes a while: long enough to see two checks start together and to interrupt them.
    time.sleep(float(os.environ.get("TOY_START_DELAY_S", "0")))
    return ToyTarget(**options)
"""


def read(out: Path) -> dict:
    data = json.loads((out / "evidence.json").read_text())
    validate_evidence_dict(data)
    return data


def slow_project(tmp_path: Path) -> Path:
    project = materialise(tmp_path / "p")
    (project / "toy" / "slow_target.py").write_text(SLOW_TARGET)
    manifest = project / "fasttrack.yaml"
    manifest.write_text(
        manifest.read_text().replace('factory: "toy.target:create"', 'factory: "toy.slow_target:create"')
    )
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "a target that starts slowly")
    return project


@pytest.mark.slow  # ~25 s: the toy project checked twice
def test_two_jobs_give_the_outcomes_of_one_and_overlap_the_target_checks(tmp_path):
    project = slow_project(tmp_path)
    env = {**os.environ, "TOY_START_DELAY_S": "1.5"}
    runs = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "fasttrack",
                "check",
                "fasttrack.yaml",
                "--no-reports",
                "-q",
                "--jobs",
                jobs,
                "--out",
                str(out),
            ],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert done.returncode in (0, 1, 3), done.stdout + done.stderr
        runs[jobs] = read(out)
    outcome = lambda e: {c["id"]: (c["status"], c["reason_code"]) for c in e["checks"]}  # noqa: E731
    assert outcome(runs["1"]) == outcome(runs["2"])
    assert [c["id"] for c in runs["1"]["checks"]] == [c["id"] for c in runs["2"]["checks"]]  # plan order kept

    def spans(evidence: dict, kinds: set[str]) -> list[tuple[float, float]]:
        from datetime import datetime

        out = []
        for c in evidence["checks"]:
            if c["kind"] in kinds and c.get("started_at") and c.get("duration_s"):
                start = datetime.fromisoformat(c["started_at"].replace("Z", "+00:00")).timestamp()
                out.append((start, start + c["duration_s"]))
        return sorted(out)

    shared = spans(runs["2"], {"switch", "features"})
    assert any(b[0] < a[1] - 0.5 for a, b in zip(shared, shared[1:])), shared  # some target checks overlapped
    alone = spans(runs["2"], {"kernels", "stress"})
    for start, end in alone:  # nothing of the target ran beside a kernel test or stress audit
        assert all(e <= start + 1.0 or s >= end - 1.0 for s, e in shared), (start, end, shared)


@pytest.mark.slow
def test_ctrl_c_with_two_jobs_stops_both_workers_and_leaves_valid_evidence(tmp_path):
    project = slow_project(tmp_path)
    out = tmp_path / "out"
    env = {**os.environ, "TOY_START_DELAY_S": "60"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fasttrack",
            "check",
            "fasttrack.yaml",
            "--no-reports",
            "--jobs",
            "2",
            "--only",
            "scope,switch,features",
            "--out",
            str(out),
        ],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list((out / "artifacts").glob("*/worker.log"))) < 2:
        time.sleep(0.1)
    assert len(list((out / "artifacts").glob("*/worker.log"))) == 2, "two workers should be running side by side"
    time.sleep(1.0)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert time.monotonic() - started < 30  # the sleeping workers were stopped, not waited for
    evidence = read(out)
    assert evidence["run"]["state"] == "interrupted"
    during = [c for c in evidence["checks"] if c["reason"] == "interrupted while running"]
    assert len(during) == 2 and {c["kind"] for c in during} <= {"switch", "features"}
    assert all(c["status"] == "not_run" for c in evidence["checks"] if c["kind"] in ("switch", "features"))
