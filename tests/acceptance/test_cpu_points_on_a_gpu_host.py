"""CPU scope points on a GPU host: the processes of a cpu point's checks (the kernel-test and
stress-audit pytest sessions, the worker that opens the target, and whatever they start) see no
GPU, and the target is told ``device="cpu"``; so ``--hardware cpu`` gives the same outcomes on a
laptop, a CPU CI runner or a GPU box. The GPU host is simulated by what makes a GPU visible to a
process, its environment (CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES set to a device), and the
test asserts the environment each subprocess actually got."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fasttrack.process.cpu import CPU_ONLY_ENV, cpu_only_env
from support.projects import git, materialise

RECORD = """
import json, os
from pathlib import Path


def record(who, **extra):
    # Appends what this process sees to the file the test names.
    with open(os.environ["SEEN_FILE"], "a") as fh:
        seen = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")}
        fh.write(json.dumps({"who": who, "pid": os.getpid(), **seen, **extra}) + "\\n")
"""

CONFTEST = """

from toy.seen import record


def pytest_sessionstart(session):
    record("pytest")
"""

TARGET = """
from toy.seen import record
from toy.target import ToyTarget


def create(**options):
    record("target", device=options.pop("device", None))
    return ToyTarget(**options)
"""


def recording_project(tmp_path: Path) -> Path:
    project = materialise(tmp_path / "p")
    (project / "toy" / "seen.py").write_text(RECORD)
    (project / "toy" / "seen_target.py").write_text(TARGET)
    conftest = project / "tests" / "conftest.py"
    conftest.write_text(conftest.read_text() + CONFTEST)
    manifest = project / "fasttrack.yaml"
    manifest.write_text(manifest.read_text().replace('"toy.target:create"', '"toy.seen_target:create"'))
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "record what each process sees")
    return project


def test_a_cpu_points_processes_see_no_gpu_even_when_the_host_shows_one(tmp_path):
    project = recording_project(tmp_path)
    seen_file = tmp_path / "seen.jsonl"
    gpu_host = {**os.environ, "CUDA_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0", "SEEN_FILE": str(seen_file)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fasttrack",
            "check",
            "fasttrack.yaml",
            "--hardware",
            "cpu",
            "--only",
            "scope,switch,kernels,stress",
            "--no-reports",
            "--base",
            "HEAD",
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=project,
        env=gpu_host,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    seen = [json.loads(line) for line in seen_file.read_text().splitlines()]
    pytest_sessions = [s for s in seen if s["who"] == "pytest"]
    targets = [s for s in seen if s["who"] == "target"]
    assert len(pytest_sessions) == 2  # the kernel tests (one session for the setup) and the stress audit
    assert len(targets) >= 2  # the switch's proof of path opens both sides
    assert all(s["CUDA_VISIBLE_DEVICES"] == "" and s["HIP_VISIBLE_DEVICES"] == "" for s in seen), seen
    assert {s["device"] for s in targets} == {"cpu"}


def test_only_cpu_points_hide_the_gpu():
    assert cpu_only_env({"accelerator": "cpu"}, {"A": "1", "CUDA_VISIBLE_DEVICES": "3"}) == {"A": "1", **CPU_ONLY_ENV}
    assert cpu_only_env({"accelerator": "NVIDIA H200"}, {"CUDA_VISIBLE_DEVICES": "3"}) == {"CUDA_VISIBLE_DEVICES": "3"}
    assert cpu_only_env(None) == {}  # a global check (code confinement) runs as it is
