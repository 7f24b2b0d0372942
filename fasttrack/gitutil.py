"""Git as tiny functions (each one `git` call). Errors become UsageError with git's own words."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Sequence

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
        raise UsageError(f"git {' '.join(args)} failed in {cwd}: {message[-1] if message else 'exit ' + str(done.returncode)}")
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


def default_base(cwd: Path) -> str | None:
    """The merge-base of HEAD with origin/main (or origin/master) when such a branch exists."""
    for ref in ("origin/main", "origin/master"):
        if _git(["rev-parse", "--verify", "--quiet", ref], cwd, check=False).returncode == 0:
            return merge_base(ref, "HEAD", cwd)
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
