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
from support.interrupts import default_sigint
from support.projects import git, materialise

SLOW_TARGET = """
import os, time
from pathlib import Path
from toy.target import ToyTarget

def create(**options):
    # Readiness signals instead of sleeps. TOY_BARRIER_DIR: say this target is starting and wait
    # until a second one is starting too (two checks side by side), then go on. TOY_HOLD_DIR: say
    # it is starting and hold (a check that is running when the test interrupts the run).
    for key, hold in (("TOY_BARRIER_DIR", False), ("TOY_HOLD_DIR", True)):
        folder = os.environ.get(key)
        if folder:
            Path(folder, f"started-{os.getpid()}").touch()
            deadline = time.monotonic() + (3600 if hold else 120)
            while time.monotonic() < deadline:
                if not hold and len(list(Path(folder).glob("started-*"))) >= 2:
                    Path(folder, f"met-{os.getpid()}").touch()
                    break
                time.sleep(0.05)
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
    runs = {}
    barriers = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}"
        barriers[jobs] = tmp_path / f"barrier{jobs}"
        barriers[jobs].mkdir()
        # One at a time, no second target ever starts beside the first: its wait runs out (120 s).
        env = {**os.environ, **({"TOY_BARRIER_DIR": str(barriers[jobs])} if jobs == "2" else {})}
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
            timeout=900,
            env=env,
        )
        assert done.returncode in (0, 1, 3), done.stdout + done.stderr
        runs[jobs] = read(out)
    outcome = lambda e: {c["id"]: (c["status"], c["reason_code"]) for c in e["checks"]}  # noqa: E731
    assert outcome(runs["1"]) == outcome(runs["2"])
    assert [c["id"] for c in runs["1"]["checks"]] == [c["id"] for c in runs["2"]["checks"]]  # plan order kept
    # Two targets were starting at the same moment: each saw the other at the barrier.
    assert len(list(barriers["2"].glob("met-*"))) >= 2

    def spans(evidence: dict, kinds: set[str]) -> list[tuple[float, float]]:
        from datetime import datetime

        out = []
        for c in evidence["checks"]:
            if c["kind"] in kinds and c.get("started_at") and c.get("duration_s"):
                start = datetime.fromisoformat(c["started_at"].replace("Z", "+00:00")).timestamp()
                out.append((start, start + c["duration_s"]))
        return sorted(out)

    shared = spans(runs["2"], {"switch", "features"})
    alone = spans(runs["2"], {"kernels", "stress"})
    for start, end in alone:  # nothing of the target ran beside a kernel test or stress audit
        assert all(e <= start + 1.0 or s >= end - 1.0 for s, e in shared), (start, end, shared)


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.slow
def test_ctrl_c_with_two_jobs_stops_both_workers_and_leaves_valid_evidence(tmp_path):
    project = slow_project(tmp_path)
    out = tmp_path / "out"
    hold = tmp_path / "hold"  # each target says here that it is starting, then holds
    hold.mkdir()
    env = {**os.environ, "TOY_HOLD_DIR": str(hold)}
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
        preexec_fn=default_sigint,  # the Ctrl-C below must reach it (support.interrupts)
    )
    deadline = time.monotonic() + 600  # a guard against a hang, not a timing assumption
    while len(list(hold.glob("started-*"))) < 2:
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "two workers should be running side by side"
        time.sleep(0.05)
    workers = [int(p.name.split("-")[1]) for p in hold.glob("started-*")]
    proc.send_signal(signal.SIGINT)
    # The held targets never finish by themselves (an hour): an exit means they were stopped.
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 130, output
    assert not any(alive(pid) for pid in workers), "a worker outlived the run"
    evidence = read(out)
    assert evidence["run"]["state"] == "interrupted"
    during = [c for c in evidence["checks"] if c["reason"] == "interrupted while running"]
    assert len(during) == 2 and {c["kind"] for c in during} <= {"switch", "features"}
    assert all(c["status"] == "not_run" for c in evidence["checks"] if c["kind"] in ("switch", "features"))
