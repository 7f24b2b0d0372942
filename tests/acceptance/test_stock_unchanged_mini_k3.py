"""stock_unchanged on the example (mini-k3, its own manifest): in a repository holding the example,
a change behind the switches leaves the stock path unchanged and passes; a planted change to the
stock path (the model's RMSNorm, which both paths use) fails with the token or logprob named."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fasttrack.environment import Environment
from fasttrack.kinds.context import RunContext
from fasttrack.kinds.registry import KINDS
from fasttrack.kinds.stock_unchanged import run as stock_unchanged
from fasttrack.manifest import load_manifest
from fasttrack.plan import build_plan
from support.projects import commit_all, git

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "mini-k3"
CPU = Environment("cpu", (), "test", "loopback", "cpu", 2, "Linux", "3.11")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("needs git")
    pytest.importorskip("torch")
    root = tmp_path / "repo"
    shutil.copytree(
        EXAMPLE, root / "examples" / "mini-k3", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "tests")
    )
    return commit_all(root, "base")


def run_check(root: Path, tmp_path: Path):
    manifest = load_manifest(root / "examples" / "mini-k3" / "fasttrack.yaml")
    [instance] = [
        i for i in build_plan(manifest, CPU, KINDS).instances if i.kind == "stock_unchanged" and i.runnable
    ]  # the manifest's point: cpu at TP 1
    base = git(root, "rev-parse", "HEAD~1")
    context = RunContext(manifest, CPU, tmp_path / "out", tmp_path / "out" / "artifacts" / "s", 600.0, base)
    context.artifact_dir.mkdir(parents=True)
    return stock_unchanged.run(instance, context)


def edit(root: Path, relative: str, old: str, new: str) -> None:
    path = root / "examples" / "mini-k3" / relative
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    git(root, "commit", "-qam", f"edit {relative}")


@pytest.mark.slow
def test_a_change_behind_the_switches_passes(repo, tmp_path):
    edit(
        repo,
        "mini_k3/latency/kernel_choice.py",
        "def is_small_step(",
        "# the PR's change to a technique: behind its switch\ndef is_small_step(",
    )
    outcome = run_check(repo, tmp_path)
    assert outcome.status.value == "passed", outcome.reason
    assert outcome.measurements["tokens"] > 0 and outcome.measurements["max_logprob_diff"] == 0.0


@pytest.mark.slow
def test_a_planted_change_to_the_stock_path_fails(repo, tmp_path):
    edit(
        repo,
        "mini_k3/model.py",
        "x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)",
        "x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps * 100)",
    )
    outcome = run_check(repo, tmp_path)
    assert outcome.status.value == "failed" and outcome.reason_code == "mismatch", outcome.reason
    assert outcome.reason.startswith("the stock path changed") or "logprobs differ" in outcome.reason
