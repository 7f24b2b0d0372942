"""Everything a run needs before its first check: manifest, machine, plan, commits, code
identity, and (with --resume) the reusable outcomes of the previous run in the same folder."""

from __future__ import annotations

import hashlib
import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from fasttrack import gitutil
from fasttrack.environment import Environment, detect_environment
from fasttrack.errors import UsageError
from fasttrack.evidence import Artifact, CheckOutcome, EvidenceError, GitRecord, ManifestRecord, read_evidence
from fasttrack.manifest import Manifest, load_manifest
from fasttrack.manifest.overrides import with_eval_limits
from fasttrack.plan import Plan, build_plan
from fasttrack.selection import Selection, resolve_hardware

if TYPE_CHECKING:
    from fasttrack.engine.options import CheckOptions


@dataclass(frozen=True)
class Setup:
    manifest: Manifest
    environment: Environment
    plan: Plan
    manifest_record: ManifestRecord
    git_record: GitRecord
    base: str | None
    head: str | None
    code_identity: str
    previous: dict[str, list[CheckOutcome]]
    selection: Selection  # --hardware resolved to the manifest's accelerator names


def prepare(options: CheckOptions) -> Setup:
    if not math.isfinite(options.timeout_scale) or options.timeout_scale <= 0:
        # inf would let a hanging check hang forever; nan makes every timeout meaningless
        raise UsageError(f"--timeout-scale must be a finite number above 0, got {options.timeout_scale}")
    manifest = with_eval_limits(load_manifest(options.manifest), options.eval_limits)
    environment = detect_environment(accelerators=True, root=manifest.root)
    selection = options.selection
    if selection.hardware:
        declared = list(dict.fromkeys(entry.accelerator for entry in manifest.scope.hardware))
        selection = replace(selection, hardware=resolve_hardware(selection.hardware, declared, environment.count_of))
    plan = build_plan(manifest, environment)
    commits = gitutil.resolve_commits(manifest.root, options.base, options.head)
    base, head = commits.base, commits.head
    code_identity = code_identity_of(manifest, head)
    out_dir = Path(options.out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out: {out_dir} exists and is not a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    previous = load_previous(out_dir, manifest.sha256) if options.resume else {}
    clean_artifacts(out_dir, [a for outcomes in previous.values() for o in outcomes for a in o.artifacts])
    record = ManifestRecord(
        _display_path(Path(options.manifest), manifest.root),
        manifest.sha256,
        manifest.id,
        manifest.optimisation.title,
        manifest.model.id,
        manifest.switch.name,
        manifest.data,
    )
    git = GitRecord(base, head, commits.dirty, commits.changed, commits.base_source)
    return Setup(manifest, environment, plan, record, git, base, head, code_identity, previous, selection)


def code_identity_of(manifest: Manifest, head: str | None) -> str:
    """The head commit plus the uncommitted state of the model's code and allowed paths."""
    if head is None:
        return "no-git"
    paths = [*manifest.model.code_paths, *manifest.model.allowed_paths]
    for test in manifest.kernel_tests:
        paths.extend(f"{p.rstrip('/')}/**" if not p.endswith(".py") else p for p in test.paths)
    dirty = gitutil.worktree_digest(manifest.root, paths)
    return hashlib.sha256(f"{head}:{dirty}".encode()).hexdigest()


def load_previous(out_dir: Path, manifest_sha256: str) -> dict[str, list[CheckOutcome]]:
    """Outcomes of the evidence already in ``out_dir``, by instance id (only for the same manifest)."""
    path = out_dir / "evidence.json"
    if not path.exists():
        return {}
    try:
        evidence = read_evidence(path)
    except EvidenceError:
        return {}  # unreadable evidence: nothing to resume, run everything
    if evidence.manifest.sha256 != manifest_sha256:
        return {}
    previous: dict[str, list[CheckOutcome]] = {}
    for outcome in evidence.checks:
        previous.setdefault(outcome.id.split("#", 1)[0], []).append(outcome)
    return previous


def _display_path(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def clean_artifacts(out_dir: Path, keep: Sequence[Artifact]) -> None:
    """Remove artifact files no kept outcome refers to (a fresh run starts clean)."""
    folder = out_dir / "artifacts"
    if not folder.is_dir() or not (out_dir / "evidence.json").exists():
        return  # only ever clean a folder fasttrack wrote (it holds evidence.json)
    keep_paths = {(out_dir / a.path).resolve() for a in keep}
    for path in sorted(folder.rglob("*"), reverse=True):
        if path.is_file() and path.resolve() not in keep_paths:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    if folder.is_dir() and not any(folder.iterdir()):
        shutil.rmtree(folder, ignore_errors=True)
