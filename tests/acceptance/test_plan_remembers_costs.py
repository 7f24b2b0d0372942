"""`plan` after a `check` on the same machine estimates from what the check measured, with no
--costs-from (#37: the built-in guesses were ~6x off for the vLLM example); `--no-cache` neither
reads nor writes that memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.projects import materialise

LINE = "estimated wall time from the measured costs of this optimisation's last run here"


def fasttrack(project: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FASTTRACK_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "fasttrack", *args], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )


def test_plan_after_a_check_estimates_from_its_measured_costs(tmp_path):
    project, cache = materialise(tmp_path / "toy"), tmp_path / "cache"
    before = fasttrack(project, cache, "plan", "fasttrack.yaml")
    assert before.returncode == 0, before.stderr
    assert LINE not in before.stdout and "(rough)" in before.stdout

    ran = fasttrack(project, cache, "check", "fasttrack.yaml", "--only", "scope", "--out", str(tmp_path / "out"))
    assert ran.returncode in (0, 1, 3), ran.stderr
    run_id = json.loads((tmp_path / "out" / "evidence.json").read_text())["run"]["id"]
    after = fasttrack(project, cache, "plan", "fasttrack.yaml")
    assert after.returncode == 0, after.stderr
    assert f"{LINE} ({run_id}):" in after.stdout
    assert "1 of 10 runnable instances measured" in after.stdout  # only scope_diff ran


def test_no_cache_neither_writes_nor_reads_the_measured_costs(tmp_path):
    project, cache = materialise(tmp_path / "toy"), tmp_path / "cache"
    args = ("check", "fasttrack.yaml", "--only", "scope", "--no-cache", "--out", str(tmp_path / "out"))
    ran = fasttrack(project, cache, *args)
    assert ran.returncode in (0, 1, 3), ran.stderr
    assert not (cache / "costs").exists()
