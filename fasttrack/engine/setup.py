"""Everything a run needs before its first check: manifest, machine, plan, commits, code
identity, and (with --resume) the reusable outcomes of the previous run in the same folder."""

from __future__ import annotations

import hashlib
import math
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack import gitutil
from fasttrack.environment import Environment, detect_environment
from fasttrack.errors import EvidenceError, UsageError
from fasttrack.evidence import (
    Artifact,
    CheckOutcome,
    Evidence,
    GitRecord,
    ManifestRecord,
    Status,
    parse_evidence,
    read_evidence_bytes,
)
from fasttrack.fileio import require_writable
from fasttrack.manifest import Manifest, load_manifest
from fasttrack.manifest.caps import plan_problem
from fasttrack.manifest.overrides import with_eval_limits
from fasttrack.manifest.policy import Policy, apply_policy
from fasttrack.outlock import lock_out
from fasttrack.plan import Plan, build_plan
from fasttrack.selection import Selection, resolve_hardware
from fasttrack.targets.build import from_command
from fasttrack.targets.dependencies import with_dependencies

if TYPE_CHECKING:
    from fasttrack.engine.options import CheckOptions
    from fasttrack.kinds.base import Kinds


@dataclass(frozen=True)
class Setup:
    manifest: Manifest
    environment: Environment
    plan: Plan
    kinds: Kinds
    manifest_record: ManifestRecord
    git_record: GitRecord
    base: str | None
    head: str | None
    code_identity: str
    previous: dict[str, list[CheckOutcome]]
    selection: Selection  # --hardware resolved to the manifest's accelerator names
    resume_note: str | None = None  # with --resume: what the earlier evidence gave (or why nothing)
    engine_build: dict[str, Any] | None = None  # target.engine_build.command's answer
    policy: Policy | None = None  # --policy-from: the PR's manifest against the base's


def prepare(options: CheckOptions, kinds: Kinds) -> Setup:
    if not math.isfinite(options.timeout_scale) or options.timeout_scale <= 0:
        # inf would let a hanging check hang forever; nan makes every timeout meaningless
        raise UsageError(f"--timeout-scale must be a finite number above 0, got {options.timeout_scale}")
    manifest = load_manifest(options.manifest)
    policy = None
    if options.policy_from:  # the reviewers' rules come from the base, not from the PR
        shown = _display_path(Path(options.manifest), manifest.root)
        manifest, policy = apply_policy(manifest, shown, options.policy_from, options.accept_policy_change)
    manifest = with_eval_limits(manifest, options.eval_limits)
    require_writable(Path(options.out_dir), "--out")  # before anything slow: a bad --out is a usage error now
    lock_out(Path(options.out_dir))  # one run per folder; held until the process ends or the CLI releases it
    environment = with_dependencies(detect_environment(accelerators=True, root=manifest.root), manifest)
    selection = options.selection
    if selection.hardware:
        declared = list(dict.fromkeys(entry.accelerator for entry in manifest.scope.hardware))
        selection = replace(selection, hardware=resolve_hardware(selection.hardware, declared, environment.count_of))
    plan = build_plan(manifest, environment, kinds)
    too_big = plan_problem(manifest.scope_size(), len(plan.instances), len(repr(manifest.frozen_data)))
    if too_big:  # before anything is written: the evidence would be refused by its own readers
        raise UsageError(f"{options.manifest}: {too_big}")
    commits = gitutil.resolve_commits(manifest.root, options.base, options.head)
    base, head = commits.base, commits.head
    code_identity = code_identity_of(manifest, head, environment.dependencies)
    out_dir = Path(options.out_dir)
    previous, note = load_previous(out_dir, manifest, kinds, plan) if options.resume else ({}, None)
    clean_artifacts(out_dir, [a for outcomes in previous.values() for o in outcomes for a in o.artifacts])
    record = ManifestRecord(
        _display_path(Path(options.manifest), manifest.root),
        manifest.sha256,
        manifest.id,
        manifest.optimisation.title,
        manifest.model.id,
        ", ".join(manifest.switch_names),  # one name, or every switch of a `switches:` manifest
        manifest.data,
    )
    git = GitRecord(base, head, commits.dirty, commits.changed, commits.base_source)
    build_conf = (manifest.section("target") or {}).get("engine_build")
    build = from_command(build_conf["command"], manifest.root) if build_conf else None
    return Setup(
        manifest,
        environment,
        plan,
        kinds,
        record,
        git,
        base,
        head,
        code_identity,
        previous,
        selection,
        note,
        build,
        policy,
    )


def code_identity_of(
    manifest: Manifest, head: str | None, builds: Mapping[str, Mapping[str, Any]] | None = None
) -> str:
    """The head commit plus the uncommitted state of the model's code and allowed paths, and the
    dependency builds (``target.dependencies``) where the manifest names any: --resume reuses no
    outcome measured on another build."""
    if head is None:
        return "no-git"
    paths = [*manifest.model.code_paths, *manifest.model.allowed_paths]
    for test in manifest.kernel_tests:
        paths.extend(f"{p.rstrip('/')}/**" if not p.endswith(".py") else p for p in test.paths)
    dirty = gitutil.worktree_digest(manifest.root, paths)
    text = f"{head}:{dirty}"
    if builds:
        text += ":" + repr(sorted((name, b.get("version"), b.get("commit")) for name, b in builds.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def load_previous(
    out_dir: Path, manifest: Manifest, kinds: Kinds, plan: Plan
) -> tuple[dict[str, list[CheckOutcome]], str]:
    """Outcomes of the evidence already in ``out_dir``, by instance id, for --resume; and one line
    saying what was found. Only evidence that still verifies is reused: the same manifest, its
    digest as recorded beside it, every outcome's status following from its measurements and the
    outcomes covering the plan (fasttrack.verification.verify). Anything else: nothing is reused, and the
    line says why."""
    path = out_dir / "evidence.json"
    if not path.exists():
        return {}, f"--resume: no earlier evidence in {out_dir}; every check runs"
    try:
        raw = read_evidence_bytes(path)
        data = parse_evidence(raw, str(path), kinds=kinds)
        evidence = Evidence.from_dict(data)
    except (EvidenceError, KeyError, TypeError, ValueError) as err:
        why = err.user_message() if isinstance(err, EvidenceError) else f"{type(err).__name__}: {err}"
        return {}, f"--resume: the earlier evidence is unreadable ({why.splitlines()[0]}); every check runs again"
    if evidence.manifest.sha256 != manifest.sha256:
        return {}, "--resume: the earlier evidence is for another version of the manifest; every check runs again"
    problems = earlier_evidence_problems(path, raw, data, manifest, kinds, plan)
    if problems:
        shown = "; ".join(problems[:2]) + (f"; and {len(problems) - 2} more" if len(problems) > 2 else "")
        return {}, f"--resume: the earlier evidence does not verify, so nothing of it is reused: {shown}"
    previous: dict[str, list[CheckOutcome]] = {}
    for outcome in evidence.checks:
        previous.setdefault(outcome.id.split("#", 1)[0], []).append(outcome)
    reusable = sum(1 for o in evidence.checks if o.status in (Status.PASSED, Status.FAILED))
    return previous, (
        f"--resume: the earlier evidence verifies; {reusable} passed/failed outcome(s) whose inputs are "
        "unchanged are reused"
    )


def earlier_evidence_problems(
    path: Path, raw: bytes, data: Mapping[str, Any], manifest: Manifest, kinds: Kinds, plan: Plan
) -> list[str]:
    """What `fasttrack verify` would object to in the earlier evidence, as far as --resume cares:
    the digest recorded beside it, and the re-derived statuses and coverage of this run's plan."""
    from fasttrack.attest import paths_for
    from fasttrack.verification.verify import digest_finding, rederived_findings

    findings = [digest_finding(paths_for(path), hashlib.sha256(raw).hexdigest())]
    findings += rederived_findings(data, manifest, kinds, plan=plan)
    return [f"{f.name}: {f.message}" for f in findings if not f.ok]


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
