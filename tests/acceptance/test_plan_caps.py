"""#35 row 4: caps when the plan is made. The issue's reproduction (100 batch points x 4 engine
dimensions of 10 values: 10^6 scope points) exits 2 at `validate` and `check`, with the numbers,
before any evidence is written; a plan too large for its own readers is refused the same way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fasttrack.manifest.caps import plan_problem
from support.projects import materialise

POINTS = ", ".join(str(n) for n in range(1, 101))
DIMENSIONS = "".join(f"    dim{d}: [{', '.join(f'v{n}' for n in range(10))}]\n" for d in range(4))
HUGE_SCOPE = f"\n  batch: {{min: 1, max: 100, points: [{POINTS}]}}\n  engine:\n{DIMENSIONS}"


def fasttrack(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fasttrack", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def test_row4_a_million_scope_points_exit_2_with_the_numbers(tmp_path):
    project = materialise(tmp_path / "p")
    manifest = project / "fasttrack.yaml"
    text = manifest.read_text()
    manifest.write_text(text.replace("\n  batch: {min: 1, max: 32, points: [1, 17, 32]}", HUGE_SCOPE))
    for args in (
        ("validate", "fasttrack.yaml"),
        ("check", "fasttrack.yaml", "--only", "scope_diff", "--out", str(tmp_path / "o")),
    ):
        done = fasttrack(project, *args)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "$.scope: the scope declares 1,000,000 scope points" in done.stdout + done.stderr
        assert "more than the 20,000 fasttrack plans" in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "o" / "evidence.json").exists()


def test_row4_the_plan_cap_names_instances_and_expected_size():
    assert plan_problem(1008, 430, 20_000) is None  # the largest example
    text = plan_problem(19_000, 19_000, 20_000)
    assert text is not None and "19,000 check instances over 19,000 scope points" in text and "32 MiB" in text
