"""stock_unchanged: the stock path at head against the base commit's (a git worktree), and
gated_paths in code confinement. The fixture project edits a shared layer file behind its
switch; a planted change to the stock path must fail, a change behind the switch must pass."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from fasttrack.environment import Environment
from fasttrack.kinds.context import RunContext
from fasttrack.kinds.registry import KINDS
from fasttrack.kinds.scope_diff.confine import confine
from fasttrack.kinds.stock_unchanged import rule as stock_rule
from fasttrack.kinds.stock_unchanged import run as stock_unchanged
from fasttrack.manifest import load_manifest
from fasttrack.plan import build_plan
from support.projects import commit_all, git

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "stock_unchanged"
CPU = Environment("cpu", (), "test", "loopback", "cpu", 2, "Linux", "3.11")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("needs git")
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    commit_all(root, "base")
    return root


def edit(root: Path, relative: str, old: str, new: str, commit: bool = True) -> None:
    path = root / relative
    text = path.read_text()
    assert old in text, (relative, old)
    path.write_text(text.replace(old, new))
    if commit:
        git(root, "commit", "-qam", f"edit {relative}")


def check(root: Path, base: str | None, tmp_path: Path, out: Path | None = None):
    m = load_manifest(root / "fasttrack.yaml")
    [instance] = [i for i in build_plan(m, CPU, KINDS).instances if i.name == "greedy"]
    assert instance.runnable, instance.reason
    head = git(root, "rev-parse", "HEAD")
    out = out or tmp_path / "out"
    context = RunContext(m, CPU, out, out / "artifacts" / "stock", 300.0, base, head)
    context.artifact_dir.mkdir(parents=True, exist_ok=True)
    return stock_unchanged.run(instance, context)


def test_a_change_behind_the_switch_leaves_the_stock_path_unchanged(repo, tmp_path):
    base = git(repo, "rev-parse", "HEAD")
    edit(
        repo,
        "shared/layers.py",
        '"""The optimised form, used only with the switch on."""\n    return float(np.sin(position / 7.0))',
        '"""The optimised form, used only with the switch on."""\n    return float(np.sin(position * (1 / 7.0)))',
    )
    outcome = check(repo, base, tmp_path)
    assert outcome.status.value == "passed", outcome.reason
    m = outcome.measurements
    # three prompts alone and the three together, 8 greedy tokens each
    assert m["requests"] == 6 and m["tokens"] == 6 * 8 and m["max_logprob_diff"] <= 1e-5
    assert m["gated_paths"] == ["shared/**"]


def test_a_relative_out_is_resolved_before_the_base_worktree_runs(repo, tmp_path, monkeypatch):
    """``--out`` relative to the invoking directory: the job and answer files handed to the side
    running in the base worktree are absolute, not resolved against the worktree (#36 item 12)."""
    base = git(repo, "rev-parse", "HEAD")
    edit(
        repo,
        "shared/layers.py",
        '"""The optimised form, used only with the switch on."""\n    return float(np.sin(position / 7.0))',
        '"""The optimised form, used only with the switch on."""\n    return float(np.sin(position * (1 / 7.0)))',
    )
    monkeypatch.chdir(tmp_path)
    outcome = check(repo, base, tmp_path, out=Path("relative-out"))
    assert outcome.status.value == "passed", outcome.reason
    assert (tmp_path / "relative-out" / "artifacts" / "stock" / "stock-base.json").is_file()


def test_a_planted_change_to_the_stock_path_fails(repo, tmp_path):
    base = git(repo, "rev-parse", "HEAD")
    edit(
        repo,
        "shared/layers.py",
        "def position_mix(position: int) -> float:\n    return float(np.sin(position / 7.0))",
        "def position_mix(position: int) -> float:\n    return float(np.sin(position / 7.0) + 1e-3)",
    )
    outcome = check(repo, base, tmp_path)
    assert outcome.status.value == "failed" and outcome.reason_code == "mismatch"
    assert outcome.measurements["max_logprob_diff"] > outcome.measurements["logprob_atol"]


def test_a_changed_greedy_token_is_named(repo, tmp_path):
    base = git(repo, "rev-parse", "HEAD")
    edit(
        repo,
        "shared/layers.py",
        "def position_mix(position: int) -> float:\n    return float(np.sin(position / 7.0))",
        "def position_mix(position: int) -> float:\n    return float(np.sin(position / 7.0) + 40.0 * (position % 2))",
        commit=False,
    )  # uncommitted: head is the work tree as it is
    outcome = check(repo, base, tmp_path)
    assert outcome.status.value == "failed"
    assert "the stock path changed: request b1:" in outcome.reason and "greedy token" in outcome.reason


def test_no_base_is_not_run_and_equal_trees_pass(repo, tmp_path):
    outcome = check(repo, None, tmp_path)
    assert outcome.status.value == "not_run" and outcome.reason_code == "no_base"
    head = git(repo, "rev-parse", "HEAD")
    same = check(repo, head, tmp_path)
    assert same.status.value == "passed" and same.measurements["identical_stock_files"] is True
    (repo / "README.md").write_text("docs only\n")  # outside code and gated paths: nothing to run
    assert check(repo, head, tmp_path).measurements.get("identical_stock_files") is True
    (repo / "shared" / "extra.py").write_text("X = 1\n")  # an untracked file in a gated path: compared
    assert check(repo, head, tmp_path).measurements.get("stock_files_changed") == ["shared/extra.py"]
    assert "fasttrack-base" not in git(repo, "worktree", "list")  # nothing left behind


def test_the_base_worktree_is_removed_even_when_the_run_fails(repo, tmp_path):
    base = git(repo, "rev-parse", "HEAD")
    edit(repo, "tinylm/target.py", "def create(fast_path=False", "def create(broken, fast_path=False")
    outcome = check(repo, base, tmp_path)
    assert outcome.status.value == "errored" and "at head" in outcome.reason
    assert git(repo, "worktree", "list").count("\n") == 0  # only the main worktree


def test_compare_runs_fails_on_missing_answers_and_passes_within_tolerance():
    answer = {"prompt": "p", "token_ids": [1, 2], "logprobs": [{"logprob": -0.5, "top": {"1": -0.5}}] * 2}
    close = {**answer, "logprobs": [{"logprob": -0.5 + 5e-6, "top": {"1": -0.5}}] * 2}
    base = stock_unchanged.StockRun({"b1:0": answer})
    assert stock_unchanged.compare_runs(base, stock_unchanged.StockRun({"b1:0": close}), 1e-5).status.value == "passed"
    assert stock_unchanged.compare_runs(base, stock_unchanged.StockRun({}), 1e-5).status.value == "failed"
    shorter = {**answer, "token_ids": [1], "logprobs": answer["logprobs"][:1]}
    result = stock_unchanged.compare_runs(base, stock_unchanged.StockRun({"b1:0": shorter}), 1e-5)
    assert result.status.value == "failed" and "1 tokens at head, 2 at base" in (result.reason or "")


def test_gated_paths_are_allowed_by_confinement_and_listed_apart():
    result = confine(
        ["tinylm/target.py", "shared/layers.py", "setup.cfg"], ["tinylm/**"], [], None, gated_paths=["shared/**"]
    )
    assert result.gated == ("shared/layers.py",)
    assert [v["path"] for v in result.violations] == ["setup.cfg"]


def exact_check(root: Path, tmp_path: Path, monkeypatch):
    """The exactness promise's instance, run as the engine runs an arm (its manifest for_arm)."""
    for name in [n for n in sys.modules if n.split(".")[0] in ("tinylm", "shared")]:
        monkeypatch.delitem(sys.modules, name)  # each test's tree, not a cached import
    edit(
        root, "fasttrack.yaml", "  proof: {source: inprocess}\n", "  proof: {source: inprocess}\n  exact: true\n", False
    )
    m = load_manifest(root / "fasttrack.yaml")
    [instance] = [i for i in build_plan(m, CPU, KINDS).instances if i.name.startswith("exact~")]
    assert instance.name == "exact~fast_path" and instance.required and instance.runnable, instance.reason
    out = tmp_path / "out"
    context = RunContext(m.for_arm(instance.config["arm"]), CPU, out, out / "artifacts" / "exact", 300.0)
    context.artifact_dir.mkdir(parents=True, exist_ok=True)
    outcome = stock_unchanged.run(instance, context)
    evidence_like = {"name": instance.name, "status": outcome.status.value, "measurements": outcome.measurements}
    assert stock_rule.check(evidence_like, None) == []  # type: ignore[arg-type]
    return outcome


def test_an_exactness_promise_passes_a_bit_identical_fast_path(repo, tmp_path, monkeypatch):
    outcome = exact_check(repo, tmp_path, monkeypatch)
    assert outcome.status.value == "passed", outcome.reason
    m = outcome.measurements
    assert m["exact"] is True and m["logprob_atol"] == 0 and m["max_logprob_diff"] == 0 and m["tokens"] == 6 * 8
    assert m["switches_on"] == ["fast_path"]


def test_an_exactness_promise_fails_on_the_last_bit_and_names_the_first_difference(repo, tmp_path, monkeypatch):
    # a reassociation: the same maths, a different last bit (well within any stock_unchanged tolerance)
    edit(
        repo,
        "shared/layers.py",
        '"""The optimised form, used only with the switch on."""\n    return float(np.sin(position / 7.0))',
        '"""The optimised form, used only with the switch on."""\n    return float(np.sin(position * (1 / 7.0)))',
        False,
    )
    outcome = exact_check(repo, tmp_path, monkeypatch)
    assert outcome.status.value == "failed" and outcome.reason_code == "mismatch"
    assert outcome.reason.startswith("promised bit-identical to stock (exact: true), but request ")
    assert "at candidate" in outcome.reason and "at stock" in outcome.reason
    assert outcome.measurements["first_mismatch"] in outcome.reason


def test_an_exactness_outcome_judged_at_a_tolerance_is_refused_by_the_rule():
    forged = {
        "name": "exact~fast_path",
        "status": "passed",
        "measurements": {"exact": True, "requests": 1, "tokens": 2, "max_logprob_diff": 1e-6, "logprob_atol": 1e-5},
    }
    assert stock_rule.check(forged, None) == [
        "passed, but it is an exactness promise and was not judged at tolerance 0"
    ]  # type: ignore[arg-type]


def test_an_exactness_promise_is_planned_per_dtype_for_its_switch_only():
    m = load_manifest(Path(__file__).resolve().parents[2] / "fixtures/manifests/valid/switch-exact.yaml")
    exact = [i for i in build_plan(m, CPU, KINDS).instances if i.name.startswith("exact~")]
    assert {(i.name, i.scope_point.get("dtype")) for i in exact} == {
        ("exact~launch_elision", "fp32"),
        ("exact~launch_elision", "bf16"),
    }
    assert all(i.required and i.config["arm"] == ["launch_elision"] and i.config["prompts"] == 4 for i in exact)


def test_a_module_the_target_needs_and_this_machine_lacks_is_not_run_dependency(repo, tmp_path):
    """The target's code at one side needs a module missing here: not_run(dependency) naming it, as
    every kind records `TargetDependencyMissing` (kinds.context.target_failure), never errored."""
    base = git(repo, "rev-parse", "HEAD")
    edit(
        repo,
        "tinylm/target.py",
        "from shared import layers\n",
        "from shared import layers\nimport no_such_kernels_here\n",
    )
    outcome = check(repo, base, tmp_path)
    assert (outcome.status.value, outcome.reason_code) == ("not_run", "dependency"), outcome.reason
    assert "needs the Python module 'no_such_kernels_here'" in outcome.reason
