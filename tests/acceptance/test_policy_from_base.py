"""#35 row 3: the pull request cannot loosen the gate's own policy. The issue's reproduction: a
file changed outside the code paths and `"**"` added to `model.allowed_paths` in the same PR."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.projects import git, materialise


def fasttrack(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    return subprocess.run(
        [sys.executable, "-m", "fasttrack", *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=env
    )


@pytest.fixture
def loosening_pr(tmp_path) -> Path:
    project = materialise(tmp_path / "p")
    git(project, "checkout", "-q", "-b", "pr")
    (project / "outside.py").write_text("x = 1\n")
    manifest = project / "fasttrack.yaml"
    manifest.write_text(
        manifest.read_text().replace('allowed_paths: ["tests/**"]', 'allowed_paths: ["tests/**", "**"]')
    )
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "loosen")
    return project


def test_row3_without_the_base_policy_the_pr_passes_its_own_rules(loosening_pr, tmp_path):
    done = fasttrack(
        loosening_pr, "check", "fasttrack.yaml", "--only", "scope_diff", "--base", "main", "--out", str(tmp_path / "o")
    )
    assert done.returncode == 0, done.stdout + done.stderr  # what the issue reproduced


def test_row3_policy_from_the_base_fails_the_loosening_pr_and_says_why(loosening_pr, tmp_path):
    out = tmp_path / "o"
    args = ("check", "fasttrack.yaml", "--only", "scope_diff", "--base", "main", "--policy-from", "main")
    done = fasttrack(loosening_pr, *args, "--out", str(out))
    assert done.returncode == 1, done.stdout + done.stderr
    flag = "this PR changes the gate's policy: allowed_paths gained `**`"
    assert (
        f"Policy changed: {flag}" in done.stdout.splitlines()[3]
    )  # the first screen: after the verdict, counts and sizes
    summary = (out / "summary.md").read_text()
    assert f"**Policy changed**: {flag}" in summary.split("**Failed**")[0]
    evidence = json.loads((out / "evidence.json").read_text())
    checks = {c["id"]: c for c in evidence["checks"]}
    # Judged by the base's rules: the file outside the code paths fails confinement too.
    assert checks["scope_diff/code_paths"]["status"] == "failed"
    assert checks["scope_diff/code_paths#policy"]["reason_code"] == "policy_changed"
    assert evidence["manifest"]["data"]["model"]["allowed_paths"] == ["tests/**"]
    # verify holds the PR's manifest to the base's policy as well, and the outcomes re-derive.
    verified = fasttrack(
        loosening_pr, "verify", str(out), "--allow-partial", "--manifest", "fasttrack.yaml", "--policy-from", "main"
    )
    assert verified.returncode == 1 and f"FAIL policy: {flag}" in verified.stdout
    assert "ok   measurements:" in verified.stdout and "ok   plan:" in verified.stdout

    accepted = fasttrack(loosening_pr, *args, "--accept-policy-change", "--out", str(tmp_path / "a"))
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert f"{flag} — accepted with --accept-policy-change" in accepted.stdout


def test_row3_a_pr_that_keeps_the_policy_passes(tmp_path):
    project = materialise(tmp_path / "p")
    git(project, "checkout", "-q", "-b", "pr")
    (project / "toy" / "extra.py").write_text("y = 2\n")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "inside")
    args = ("check", "fasttrack.yaml", "--only", "scope_diff", "--base", "main", "--policy-from", "main")
    done = fasttrack(project, *args, "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Policy changed" not in done.stdout
    bad = fasttrack(project, *args[:-1], "no-such-ref", "--out", str(tmp_path / "x"))
    assert bad.returncode == 2 and "--policy-from no-such-ref: not a commit" in bad.stderr
