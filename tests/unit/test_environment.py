"""detect_environment: accelerators, CPU, versions and git state, fast by default."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fasttrack import environment
from fasttrack.environment import Accelerator, Environment, GitState, detect_environment, git_state

FAKE_SMI = """#!/bin/sh
case "$*" in
  *topo*) printf '        GPU0    GPU1\\nGPU0     X      NV18\\nGPU1    NV18     X\\n' ;;
  *driver_version*) printf '580.82.07\\n580.82.07\\n' ;;
  *) printf '0, NVIDIA GB300, 284208\\n1, NVIDIA GB300, 284208\\n' ;;
esac
"""


def test_fast_path_without_accelerators_is_json_ready():
    """Without accelerators nothing is probed (its speed: benchmarks/cli_speed.py)."""
    env = detect_environment(accelerators=False)
    assert env.accelerator == "cpu" and env.accelerator_source == "not probed"
    assert env.cpu_count >= 1 and env.python == ".".join(map(str, sys.version_info[:3]))
    assert env.packages["fasttrack"] is not None
    data = env.to_dict()
    json.dumps(data)
    assert data["accelerator_count"] == 0 and data["accelerators"] == []


def test_fast_path_does_not_import_torch():
    code = "import sys; from fasttrack.environment import detect_environment; detect_environment(accelerators=False); print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr


def test_nvidia_smi_is_used_when_torch_cannot_see_gpus(tmp_path, monkeypatch):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(environment, "find_spec", lambda name: None)  # as if torch were absent
    env = detect_environment()
    assert env.accelerator_source == "nvidia-smi"
    assert [a.name for a in env.accelerators] == ["NVIDIA GB300", "NVIDIA GB300"]
    assert env.accelerators[0].memory_bytes == 284208 * 2**20
    assert env.interconnect == "nvlink"
    assert env.cuda_driver == "580.82.07"
    assert env.count_of("nvidia gb300") == 2 and env.count_of("NVIDIA H200") == 0
    assert env.describe().startswith("2x NVIDIA GB300 (278 GiB each) over nvlink")


def test_no_gpu_means_cpu_and_loopback(monkeypatch):
    monkeypatch.setattr(environment, "_gpu_driver_present", lambda: False)
    monkeypatch.setattr(environment.shutil, "which", lambda name: None)
    env = detect_environment()
    assert env.accelerator == "cpu" and env.accelerators == () and env.interconnect == "loopback"
    assert env.describe() == f"cpu ({env.cpu_count} cores), no GPU"


def test_count_of_matches_driver_names_loosely():
    env = Environment("NVIDIA H200 NVL", (Accelerator(0, "NVIDIA H200 NVL"),), "torch", "none", "x", 8, "Linux", "3.11")
    assert env.count_of("NVIDIA H200") == 1
    assert env.count_of("nvidia-h200") == 1
    assert env.count_of("NVIDIA H100") == 0
    assert env.count_of("") == 0


def _git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args],
        cwd=folder,
        check=True,
        capture_output=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        },
    )


def test_git_state_head_branch_dirty(tmp_path):
    _git(tmp_path, "init", "-q", "-b", "work")
    (tmp_path / "a.txt").write_text("1")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "commit", "-q", "-m", "one")
    state = git_state(tmp_path)
    assert state.branch == "work" and state.dirty is False and len(state.head) == 40
    (tmp_path / "a.txt").write_text("2")
    assert git_state(tmp_path).dirty is True


def test_git_state_outside_a_repository(tmp_path):
    assert git_state(tmp_path) == GitState(None, None, None)


@pytest.mark.skipif(environment.find_spec("torch") is None, reason="torch not installed")
def test_full_detection_agrees_with_torch():
    import torch

    env = detect_environment()
    if torch.cuda.is_available():
        assert env.accelerator_count == torch.cuda.device_count()
        assert env.accelerator == torch.cuda.get_device_name(0)
    else:
        assert env.accelerator_source in ("none", "nvidia-smi")
