"""The default base commit of code confinement when --base is not given."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fasttrack import gitutil
from fasttrack.gitutil import resolve_commits

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def git(root: Path, *args: str) -> str:
    import os

    done = subprocess.run(
        ["git", *args], cwd=root, env={**os.environ, **ENV}, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def commit(root: Path, name: str) -> str:
    (root / name).write_text(name)
    git(root, "add", name)
    git(root, "commit", "-q", "-m", name)
    return git(root, "rev-parse", "HEAD")


@pytest.fixture(autouse=True)
def no_ci_variables(monkeypatch):
    for variable in ("GITHUB_BASE_REF", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME"):
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, "a")
    return root


def test_feature_branch_defaults_to_its_merge_base_with_local_main(repo):
    fork = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, "b")
    choice = gitutil.default_base(repo)
    assert (choice.sha, choice.source) == (fork, "merge-base of HEAD with main")
    commits = resolve_commits(repo, None, None)
    assert (commits.base, commits.changed, commits.base_source) == (fork, ("b",), "merge-base of HEAD with main")


def test_on_the_target_branch_itself_the_diff_is_empty_and_says_so(repo):
    choice = gitutil.default_base(repo)
    assert choice.sha == git(repo, "rev-parse", "HEAD")
    assert choice.source == "merge-base of HEAD with main (= HEAD: no commit to confine)"


def test_a_clone_uses_the_remote_default_branch_before_local_ones(repo, tmp_path):
    git(repo, "branch", "-q", "trunk")  # the remote's default branch is 'trunk' below
    git(repo, "checkout", "-q", "trunk")
    clone = tmp_path / "c"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    assert git(clone, "symbolic-ref", "--short", "refs/remotes/origin/HEAD") == "origin/trunk"
    fork = git(clone, "rev-parse", "HEAD")
    git(clone, "checkout", "-q", "-b", "opt")
    commit(clone, "x")
    choice = gitutil.default_base(clone)
    assert (choice.sha, choice.source) == (fork, "merge-base of HEAD with origin/trunk")


def test_the_ci_target_branch_comes_first(repo, monkeypatch):
    git(repo, "checkout", "-q", "-b", "release")
    release = commit(repo, "r")
    git(repo, "checkout", "-q", "-b", "fix")
    commit(repo, "f")
    monkeypatch.setenv("GITHUB_BASE_REF", "release")
    choice = gitutil.default_base(repo)
    assert (choice.sha, choice.source) == (release, "merge-base of HEAD with release")


def test_no_branch_to_default_to(repo):
    git(repo, "branch", "-q", "-m", "main", "work")
    assert gitutil.default_base(repo) is None
    assert resolve_commits(repo, None, None).base is None


def test_explicit_base_is_recorded_as_such(repo):
    first = git(repo, "rev-parse", "HEAD")
    commit(repo, "b")
    commits = resolve_commits(repo, "HEAD~1", None)
    assert (commits.base, commits.changed, commits.base_source) == (first, ("b",), "--base HEAD~1")
