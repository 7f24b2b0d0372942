"""Git as tiny functions (each one `git` call). Errors become UsageError with git's own words."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fasttrack.errors import UsageError

_TIMEOUT_S = 30


def _git(args: Sequence[str], cwd: Path, *, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise UsageError("git is not installed (needed to compare base and head)") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"git {' '.join(args)} took longer than {_TIMEOUT_S}s in {cwd}") from None
    if check and done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UsageError(
            f"git {' '.join(args)} failed in {cwd}: {message[-1] if message else 'exit ' + str(done.returncode)}"
        )
    return done


def is_repository(cwd: Path) -> bool:
    try:
        return _git(["rev-parse", "--git-dir"], cwd, check=False).returncode == 0
    except UsageError:
        return False


def rev_parse(ref: str, cwd: Path) -> str:
    """The commit sha of ``ref``; UsageError naming the ref when it does not exist."""
    done = _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd, check=False)
    if done.returncode != 0:
        raise UsageError(f"git: {ref!r} is not a commit in {cwd} (fetch it first, e.g. git fetch origin {ref})")
    return done.stdout.decode().strip()


def merge_base(a: str, b: str, cwd: Path) -> str | None:
    done = _git(["merge-base", a, b], cwd, check=False)
    return done.stdout.decode().strip() if done.returncode == 0 else None


@dataclass(frozen=True)
class BaseChoice:
    """The default base commit, or None; ``source`` says where it came from, or why there is none."""

    sha: str | None
    source: str


# CI variables naming the branch a change is meant to land on (GitHub pull requests, GitLab MRs).
_TARGET_BRANCH_VARIABLES = ("GITHUB_BASE_REF", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME")


def _exists(ref: str, cwd: Path) -> bool:
    return _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd, check=False).returncode == 0


def _candidate_base_refs(cwd: Path) -> list[str]:
    """Where a change is meant to land, most specific first: the CI's target branch, the remote's
    default branch (origin/HEAD), origin/main, origin/master, then local main and master."""
    refs = []
    for variable in _TARGET_BRANCH_VARIABLES:
        branch = os.environ.get(variable, "").strip()
        if branch:
            refs += [f"origin/{branch}", branch]
    done = _git(["symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"], cwd, check=False)
    if done.returncode == 0 and done.stdout.strip():
        refs.append(done.stdout.decode().strip())
    refs += ["origin/main", "origin/master", "main", "master"]
    return list(dict.fromkeys(refs))


def default_base(cwd: Path, head: str = "HEAD") -> BaseChoice | None:
    """The merge-base of ``head`` with the first existing branch of `_candidate_base_refs`, or None
    when none exists. A branch that exists but shares no history with ``head`` (a shallow clone)
    gives ``BaseChoice(None, why)``. On the target branch itself the base is ``head``: the diff is
    empty and ``source`` says so."""
    for ref in _candidate_base_refs(cwd):
        if not _exists(ref, cwd):
            continue
        sha = merge_base(ref, head, cwd)
        if sha is None:
            return BaseChoice(
                None,
                f"{ref} has no merge base with {head} (a shallow clone? fetch the full history, "
                "e.g. actions/checkout fetch-depth: 0)",
            )
        same = sha == rev_parse(head, cwd)
        return BaseChoice(
            sha, f"merge-base of {head} with {ref}" + (f" (= {head}: no commit to confine)" if same else "")
        )
    return None


def changed_files(base: str, head: str, cwd: Path) -> list[str]:
    """Paths changed in ``base...head`` (since their merge-base), as git prints them (POSIX)."""
    out = _git(["diff", "--name-only", "-z", "--no-renames", f"{base}...{head}"], cwd).stdout
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


def is_dirty(cwd: Path) -> bool:
    return bool(_git(["status", "--porcelain", "--untracked-files=no"], cwd).stdout.strip())


def worktree_digest(cwd: Path, pathspecs: Sequence[str]) -> str:
    """sha256 of the uncommitted state of files matching ``pathspecs`` (globs): the diff
    against HEAD plus the content of untracked files. Equal digests: equal working code."""
    specs = [f":(glob){p}" for p in pathspecs] or ["."]
    h = hashlib.sha256()
    h.update(_git(["diff", "HEAD", "--binary", "--", *specs], cwd, check=False).stdout)
    untracked = _git(["ls-files", "--others", "--exclude-standard", "-z", "--", *specs], cwd, check=False).stdout
    for name in sorted(p for p in untracked.decode("utf-8", "surrogateescape").split("\0") if p):
        h.update(name.encode("utf-8", "surrogateescape") + b"\0")
        try:
            h.update(hashlib.sha256((cwd / name).read_bytes()).digest())
        except OSError:
            pass
    return h.hexdigest()


@dataclass(frozen=True)
class Commits:
    """The commits a run compares: base (or None, with ``base_source`` saying why), head, the
    files changed in base...head, and whether the work tree was dirty."""

    base: str | None
    head: str | None
    changed: tuple[str, ...]
    dirty: bool
    base_source: str | None


def resolve_commits(root: Path, base_ref: str | None, head_ref: str | None) -> Commits:
    """Outside a git repository all are empty unless a ref was asked for (then it is an error).
    Without ``base_ref`` the base is `default_base` (docs/cli.md: "The base commit")."""
    if not is_repository(root):
        if base_ref or head_ref:
            raise UsageError(f"--base/--head given but {root} is not a git repository")
        return Commits(None, None, (), False, None)
    head = rev_parse(head_ref or "HEAD", root)
    base: str | None
    source: str | None
    if base_ref:
        base, source = rev_parse(base_ref, root), f"--base {base_ref}"
    else:
        found = default_base(root, head_ref or "HEAD")
        base, source = (found.sha, found.source) if found else (None, None)
    changed = tuple(changed_files(base, head, root)) if base else ()
    return Commits(base, head, changed, is_dirty(root), source)
