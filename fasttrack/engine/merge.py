"""`fasttrack merge`: join the evidence of parts of one run (shards 1..N, or runs on different
hardware selected with --hardware) into one evidence and verdict.

Every part lists every instance; an instance another part ran is recorded there as
not_run(out_of_scope). The merge takes, per instance, the outcome of the part that ran it (when
several ran it, e.g. code confinement in a CPU run and an H200 run, the worst outcome: fail
closed). Parts from different manifests, commits or eval sizes, or made with different engine
builds (``engine_build``: the declared build, each side's server build) or dependency builds
(``dependencies``: flashinfer, aiter ... by name), are rejected.

Kinds: parts may select different kinds (--only/--skip), e.g. the H200 evals in one run and its
benchmarks in another beside a CPU run of every kind; the merged run selects every kind some
part selected (all of them: no --only), and an instance of a selected kind that no part ran is
required again, as for hardware below.

Hardware: the merged evidence judges every declared accelerator (``run.hardware`` empty) unless
``hardware`` narrows it. An instance that no part ran because every part's --hardware excluded
it becomes *required* not_run(out_of_scope) again, so a merge that leaves a declared scope point
uncovered is INCOMPLETE and names it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from fasttrack.engine.policy import POLICY_ID
from fasttrack.errors import UsageError
from fasttrack.evidence import CheckOutcome, Evidence, RunRecord, Status, read_evidence, utc_now, write_evidence
from fasttrack.evidence.artifacts import copy_artifact
from fasttrack.selection import HERE, Selection, resolve_hardware
from fasttrack.targets.build import describe, identity
from fasttrack.verification.parts import PartChecks, PartRejected, require_verified

# Reasons that say "not on this machine", not "it went wrong": another part's result replaces them.
_NOT_HERE = frozenset({"hardware", "dependency", "interrupted", "pending"})
# Worst first: when two parts ran the same instance, the merged outcome is the worse one.
_SEVERITY = {Status.FAILED: 0, Status.ERRORED: 1, Status.NOT_RUN: 2, Status.PASSED: 3}


def _tier(outcomes: Sequence[CheckOutcome]) -> int:
    """0: this part left the instance to another (out_of_scope); 1: it could not run it here;
    2: it ran it (whatever the result)."""
    if any(o.reason_code == "out_of_scope" for o in outcomes):
        return 0
    if any(o.status is Status.NOT_RUN and o.reason_code in _NOT_HERE for o in outcomes):
        return 1
    return 2


def _better(candidate: Sequence[CheckOutcome], current: Sequence[CheckOutcome]) -> bool:
    """Whether ``candidate`` replaces ``current``: a part that ran beats one that did not; between
    two that ran, the worse result wins (fail closed); otherwise the first part's stays."""
    a, b = _tier(candidate), _tier(current)
    if a != b:
        return a > b
    return a == 2 and min(_SEVERITY[o.status] for o in candidate) < min(_SEVERITY[o.status] for o in current)


def merge_evidence(
    evidences: Sequence[Evidence], hardware: Sequence[str] = (), out_dir: Path | None = None
) -> Evidence:
    if not evidences:
        raise UsageError("fasttrack merge: give at least one evidence folder")
    first = evidences[0]
    for e in evidences[1:]:
        for what, a, b in (
            ("manifest sha256", first.manifest.sha256, e.manifest.sha256),
            ("head commit", first.git.head, e.git.head),
            ("--eval-limit", dict(first.run.eval_limits), dict(e.run.eval_limits)),
        ):
            if a != b:
                raise UsageError(
                    f"fasttrack merge: shards differ in {what} ({a} vs {b}); they are not parts of one run"
                )
    build = merged_builds(evidences)
    dependencies = merged_dependencies(evidences)
    shards = [e.run.shard for e in evidences]
    counts = {s[1] for s in shards if s}
    if len(counts) > 1:
        raise UsageError(f"fasttrack merge: shards disagree on the shard count ({sorted(counts)})")
    indices = [s[0] for s in shards if s]
    if len(indices) != len(set(indices)):
        raise UsageError(f"fasttrack merge: shard {sorted(i for i in indices if indices.count(i) > 1)[0]} given twice")
    merged: dict[str, list[CheckOutcome]] = {}
    policy = _worst_policy(evidences)
    for e in evidences:
        groups: dict[str, list[CheckOutcome]] = {}
        for o in e.checks:
            if o.id != POLICY_ID:
                groups.setdefault(o.id.split("#", 1)[0], []).append(o)
        for ident, outcomes in groups.items():
            if ident not in merged or _better(outcomes, merged[ident]):
                merged[ident] = outcomes
    only, skip = merged_kinds(evidences)
    selection = Selection(only, skip, None, tuple(hardware))
    parts = "; ".join(_describe_part(e) for e in evidences)
    checks = [_rejudge(o, selection, parts) for outcomes in merged.values() for o in outcomes] + policy
    states = {e.run.state for e in evidences}
    state = (
        "complete"
        if states == {"complete"}
        else ("interrupted" if "interrupted" in states else sorted(states - {"complete"})[0])
    )
    run = RunRecord(
        f"merge-{'-'.join(e.run.id[:8] for e in evidences)}",
        min(e.run.started_at for e in evidences),
        utc_now(),
        state,
        # --out recorded so that the next command a report names points at this evidence
        (
            "fasttrack",
            "merge",
            *(a for h in hardware for a in ("--hardware", h)),
            *(("--out", str(out_dir)) if out_dir else ()),
        ),
        None,
        only,
        skip,
        tuple(hardware),
        first.run.eval_limits,
    )
    git = replace(first.git, dirty=any(e.git.dirty for e in evidences))
    base = replace(first, run=run, git=git, engine_build=build, dependencies=dependencies)
    return base.with_checks(checks)


def _worst_policy(evidences: Sequence[Evidence]) -> list[CheckOutcome]:
    """The parts' policy outcomes (--policy-from) are kept whatever the parts selected: the worst."""
    found = [o for e in evidences for o in e.checks if o.id == POLICY_ID]
    return [min(found, key=lambda o: _SEVERITY[o.status])] if found else []


def merged_kinds(evidences: Sequence[Evidence]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The merged run's (--only, --skip): every kind some part selected; no selection at all
    when the parts together select every kind their evidence lists."""
    kinds = list(dict.fromkeys(o.kind for e in evidences for o in e.checks))
    chosen = [k for k in kinds if any(Selection(e.run.only, e.run.skip).kind_selected(k) for e in evidences)]
    if len(chosen) == len(kinds):
        return (), ()
    return tuple(chosen), ()


def _describe_part(e: Evidence) -> str:
    selection = Selection(e.run.only, e.run.skip, None, e.run.hardware)
    words = [
        w
        for w in (selection.describe_exclusion() if (e.run.only or e.run.skip) else "", selection.describe_hardware())
        if w
    ]
    return ", ".join(words) or "everything"


def merged_builds(evidences: Sequence[Evidence]) -> dict[str, Any] | None:
    """The parts' engine builds joined, per key (declared, baseline, candidate); two parts that
    recorded different builds for one key were made with different engines: refused."""
    return _joined([e.engine_build or {} for e in evidences], "engine builds ({key}: ")


def merged_dependencies(evidences: Sequence[Evidence]) -> dict[str, Any] | None:
    """The parts' dependency builds (``target.dependencies``) joined, per name; two parts that
    recorded different builds of one dependency (version or commit) are refused, as different
    engine builds are. A part where it was not installed (no version) conflicts with none."""
    return _joined([e.dependencies or {} for e in evidences], "builds of {key} (")


def _joined(records: Sequence[Mapping[str, Any]], what: str) -> dict[str, Any] | None:
    merged: dict[str, Any] = {}
    for record in records:
        for key, build in record.items():
            if key == "conflicts":
                merged.setdefault("conflicts", []).extend(build)
                continue
            have = merged.get(key)
            if have is None or identity(have) is None:
                merged[key] = build
            elif identity(build) is not None and identity(build) != identity(have):
                raise UsageError(
                    f"fasttrack merge: the parts were made with different {what.format(key=key)}"
                    f"{describe(have)} vs {describe(build)}); they are not parts of one run"
                )
    return merged or None


def _rejudge(outcome: CheckOutcome, selection: Selection, parts: str) -> CheckOutcome:
    """An outcome every part left out by --hardware is required again unless the merge's own
    selection leaves its hardware out too (kinds excluded by --only/--skip stay excluded)."""
    if outcome.reason_code != "out_of_scope" or outcome.required or not selection.kind_selected(outcome.kind):
        return outcome
    if selection.hardware_selected(outcome.scope_point):
        accelerator = (outcome.scope_point or {}).get("accelerator")
        return replace(
            outcome,
            required=True,
            reason=f"no merged run covered {accelerator} ({parts}); run it with "
            f"--hardware {accelerator!r} --only {outcome.kind} and merge that evidence too",
        )
    return replace(
        outcome,
        reason=f"{(outcome.scope_point or {}).get('accelerator')} excluded by the merge's "
        f"{selection.describe_hardware()}",
    )


def merge_dirs(
    dirs: Sequence[Path],
    out_dir: Path,
    hardware: Sequence[str] = (),
    kinds: Iterable[str] | None = None,
    checks: PartChecks | None = None,
) -> Evidence:
    """Read the parts (evidence of the check kinds ``kinds``), each verified first when ``checks``
    is given (the CLI always gives it: PartRejected names a part that does not verify), and write
    the merged evidence to ``out_dir`` with the artifacts it refers to."""
    if checks is not None:
        for d in dirs:
            require_verified(Path(d), checks)
    evidences = [read_evidence(Path(d), kinds) for d in dirs]
    merged = merge_evidence(evidences, resolve_merge_hardware(evidences, hardware), out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _copy_artifacts(merged, dirs, out_dir, strict=checks is not None)
    write_evidence(merged, out_dir / "evidence.json")
    return merged


def resolve_merge_hardware(evidences: Sequence[Evidence], requested: Sequence[str]) -> tuple[str, ...]:
    """``merge --hardware``: names resolved against the accelerators the manifest declares."""
    if not requested:
        return ()
    declared = [
        h.get("accelerator")
        for h in (evidences[0].manifest.data.get("scope") or {}).get("hardware") or ()
        if h.get("accelerator")
    ]
    if any(name.lower() == HERE for name in requested):
        raise UsageError(
            "fasttrack merge --hardware: name the accelerators ('here' means this machine, which merged evidence is not)"
        )
    return resolve_hardware(requested, list(dict.fromkeys(declared)), lambda _name: 0)


def _copy_artifacts(evidence: Evidence, dirs: Sequence[Path], out_dir: Path, strict: bool) -> None:
    """Artifacts are referenced relative to the evidence folder: bring them along, from the first
    part whose file has the recorded sha256, read without following any symlink and written
    inside ``out_dir`` only (paths were confined when the parts were read). ``strict``: an
    artifact no part holds as recorded refuses the merge."""
    for o in evidence.checks:
        for a in o.artifacts:
            problems = []
            for d in dirs:
                problem = copy_artifact(Path(d), {"path": a.path, "sha256": a.sha256, "bytes": a.bytes}, out_dir)
                if problem is None:
                    break
                problems.append(f"{d}: {problem}")
            else:
                if strict:
                    raise PartRejected(
                        f"fasttrack merge: artifact {a.path} is in no part as recorded: {'; '.join(problems)}"
                    )
