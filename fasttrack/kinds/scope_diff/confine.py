"""Code confinement: every file changed in base...head must be the model's own code
(``model.code_paths``), an allowed path (``model.allowed_paths``: its tests, docs), a gated path
(``model.gated_paths``: shared files it may edit only behind its switches, listed apart for the
reviewer; the stock_unchanged check must pass) or the manifest itself. The matcher, the check as
`fasttrack diff-scope` runs it alone (`confinement_of`), and what the runner and the rule share."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """Glob with ``**`` (any number of folders), ``*`` and ``?`` (within one path segment),
    ``[...]`` classes; anchored at the repository root. (pathlib's full_match is 3.13+.)"""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : end]
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
                i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches(path: str, patterns: Sequence[str]) -> str | None:
    """The first pattern ``path`` matches, else None. A pattern naming a folder matches inside it."""
    for pattern in patterns:
        pattern = pattern.strip().lstrip("./") if pattern.startswith("./") else pattern.strip()
        if glob_regex(pattern).match(path) or (
            not any(ch in pattern for ch in "*?[") and path.startswith(pattern.rstrip("/") + "/")
        ):
            return pattern
    return None


@dataclass(frozen=True)
class Confinement:
    changed: tuple[str, ...]
    violations: tuple[dict[str, str], ...]
    gated: tuple[str, ...] = ()  # changed shared files the manifest gates behind its switches


def confine(
    changed: Sequence[str],
    code_paths: Sequence[str],
    allowed_paths: Sequence[str],
    manifest_path: str | None,
    gated_paths: Sequence[str] = (),
) -> Confinement:
    violations = []
    gated = []
    for path in changed:
        if manifest_path and path == manifest_path:
            continue
        if matches(path, code_paths) or matches(path, allowed_paths):
            continue
        if gated_paths and matches(path, gated_paths):
            gated.append(path)
            continue
        where = (
            "model.code_paths, allowed_paths and gated_paths"
            if gated_paths
            else "model.code_paths and model.allowed_paths"
        )
        violations.append({"path": path, "reason": f"outside {where}"})
    return Confinement(tuple(changed), tuple(violations), tuple(gated))


def manifest_relpath(manifest: Manifest) -> str | None:
    try:
        return Path(manifest.path).resolve().relative_to(Path(manifest.root).resolve()).as_posix()
    except ValueError:
        return None


@dataclass(frozen=True)
class ConfinementReport:
    """`fasttrack diff-scope`'s answer: which commits were compared and what lies outside."""

    base: str
    head: str
    base_source: str
    code_paths: tuple[str, ...]
    result: Confinement


def confinement_of(manifest_path: str, base_ref: str | None, head_ref: str | None) -> ConfinementReport:
    """The confinement check alone, without environment or plan (base as for `fasttrack check`)."""
    from fasttrack import gitutil
    from fasttrack.errors import UsageError
    from fasttrack.manifest import load_manifest

    m = load_manifest(manifest_path)
    if not gitutil.is_repository(m.root):
        raise UsageError(f"{m.root} is not a git repository: nothing to diff")
    commits = gitutil.resolve_commits(m.root, base_ref, head_ref)
    if commits.base is None or commits.head is None:
        why = (
            commits.base_source
            or "no branch to default to (the CI's target branch, origin/HEAD, origin/main, origin/master, main, master)"
        )
        raise UsageError(f"no base commit: pass --base REF (e.g. --base origin/main); {why}")
    result = confine(
        commits.changed, m.model.code_paths, m.model.allowed_paths, manifest_relpath(m), m.model.gated_paths
    )
    return ConfinementReport(commits.base, commits.head, commits.base_source or "", tuple(m.model.code_paths), result)
