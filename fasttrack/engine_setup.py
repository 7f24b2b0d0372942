"""Everything a run needs before its first check: manifest, machine, plan, commits, code
identity, and (with --resume) the reusable outcomes of the previous run in the same folder."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fasttrack import gitutil
from fasttrack.engine_select import resolve_hardware
from fasttrack.errors import UsageError
from fasttrack.evidence import CheckOutcome, EvidenceError, GitRecord, ManifestRecord, read_evidence


@dataclass(frozen=True)
class Setup:
    manifest: Any
    environment: Any
    plan: Any
    manifest_record: ManifestRecord
    git_record: GitRecord
    base: str | None
    head: str | None
    code_identity: str
    previous: dict[str, list[CheckOutcome]]
    excluded_kinds: tuple[str, ...]
    selection: Any  # the run's Selection, --hardware resolved to the manifest's accelerator names


def prepare(options: Any) -> Setup:
    from fasttrack.environment import detect_environment
    from fasttrack.manifest import load_manifest
    from fasttrack.manifest.overrides import with_eval_limits
    from fasttrack.plan import build_plan

    if options.timeout_scale <= 0:
        raise UsageError(f"--timeout-scale must be positive, got {options.timeout_scale}")
    manifest = with_eval_limits(load_manifest(options.manifest), options.eval_limits)
    environment = detect_environment(accelerators=True, root=manifest.root)
    selection = options.selection
    if selection.hardware:
        declared = list(dict.fromkeys(entry.accelerator for entry in manifest.scope.hardware))
        selection = replace(selection, hardware=resolve_hardware(selection.hardware, declared, environment.count_of))
    plan = build_plan(manifest, environment)
    base, head, changed, dirty, base_source = resolve_commits(manifest.root, options.base, options.head)
    code_identity = code_identity_of(manifest, head)
    out_dir = Path(options.out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out: {out_dir} exists and is not a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    previous = load_previous(out_dir, manifest.sha256) if options.resume else {}
    clean_artifacts(out_dir, [a for outcomes in previous.values() for o in outcomes for a in o.artifacts])
    record = ManifestRecord(_display_path(Path(options.manifest), manifest.root), manifest.sha256, manifest.id,
                            manifest.optimisation.title, manifest.model.id, manifest.switch.name, manifest.data)
    excluded = tuple(selection.excluded_kinds(i.kind for i in plan.instances))
    return Setup(manifest, environment, plan, record, GitRecord(base, head, dirty, tuple(changed), base_source), base, head,
                 code_identity, previous, excluded, selection)


def resolve_commits(root: Path, base_ref: str | None, head_ref: str | None
                    ) -> tuple[str | None, str | None, list[str], bool, str | None]:
    """(base sha, head sha, changed files base...head, dirty, where the base came from).
    Outside a git repository all are empty unless a ref was asked for (then it is an error).
    Without --base the base is `gitutil.default_base` (docs/cli.md: "The base commit")."""
    if not gitutil.is_repository(root):
        if base_ref or head_ref:
            raise UsageError(f"--base/--head given but {root} is not a git repository")
        return None, None, [], False, None
    head = gitutil.rev_parse(head_ref or "HEAD", root)
    if base_ref:
        base, source = gitutil.rev_parse(base_ref, root), f"--base {base_ref}"
    else:
        found = gitutil.default_base(root, head_ref or "HEAD")
        base, source = (found.sha, found.source) if found else (None, None)
    changed = gitutil.changed_files(base, head, root) if base else []
    return base, head, changed, gitutil.is_dirty(root), source


def code_identity_of(manifest: Any, head: str | None) -> str:
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


def clean_artifacts(out_dir: Path, keep: list[Any]) -> None:
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
