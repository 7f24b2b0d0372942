"""The evidence of one gate run as typed records, its verdict, and its one serialisation
(canonical JSON: sorted keys, fixed indentation, UTF-8, no NaN), so that the sha256 of the file's
bytes *is* the evidence digest: re-serialising a parsed evidence gives the same bytes, and a
single changed byte changes the digest."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any

from fasttrack import __version__
from fasttrack.errors import EvidenceError

SCHEMA_ID = "https://fasttrack.dev/schemas/evidence/v1.json"
EVIDENCE_VERSION = 1
# An ablation arm's check name: "<benchmark or eval id>~<switch>" (its config["arm"] lists its switches).
ARM_SEPARATOR = "~"


class Status(str, Enum):
    """Outcome of one check instance at one scope point."""

    PASSED = "passed"
    FAILED = "failed"
    ERRORED = "errored"
    NOT_RUN = "not_run"


class Verdict(str, Enum):
    """The gate's verdict: PASS only when every required check passed."""

    PASS = "PASS"
    FAIL = "FAIL"
    INCOMPLETE = "INCOMPLETE"


# Why a check did not pass cleanly. Free text goes in `reason`; the code is for machines.
REASON_CODES = (
    "hardware",  # needs an accelerator / GPU count / interconnect this machine lacks
    "dependency",  # a Python package or tool is missing
    "out_of_scope",  # not part of what this run was asked to do (--only/--skip/--hardware, shard)
    "underpowered",  # statistics cannot decide at the declared margin with this n
    "uncovered",  # no test covered this scope point
    "timeout",  # ran past its timeout
    "interrupted",  # the run was interrupted (Ctrl-C, SIGTERM)
    "crashed",  # the process died (signal, non-zero exit without results)
    "target",  # the system under test could not be started or reached
    "floor",  # the baseline scores at the floor, so a regression cannot show
    "not_comparable",  # a benchmark claim whose setups differ
    "error",  # an internal or input error while running the check
    "regression",  # a measured regression (failed)
    "mismatch",  # outputs/hashes disagree (failed/errored)
    "path_not_exercised",  # the optimised path did not execute
    "no_base",  # code confinement needs a base commit and none was given
    "test_failed",  # a kernel test failed
    "outside_code_paths",  # a changed file lies outside the model's code paths
    "policy_changed",  # the pull request loosens the gate's policy (its manifest vs --policy-from) unaccepted
    "switch_default_on",  # the switch is on by default (the optimisation must be opt-in)
    "hazard",  # compute-sanitizer reported a race or synchronisation hazard
    "acts_out_of_scope",  # a switch acted where the manifest says it must not (switch.inert)
    "not_refused",  # a combination the server must refuse (switch.refused) was served
    "pending",  # only while a run is in progress
)


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Artifact:
    """A file produced by a check (log, JUnit XML, raw results), stored beside the evidence."""

    path: str  # relative to the evidence directory, POSIX separators
    sha256: str  # hex digest of the file's bytes
    bytes: int  # file size
    kind: str = "log"  # log | junit | json | jsonl | html | other
    description: str = ""

    @staticmethod
    def from_file(evidence_dir: Path, path: Path, kind: str = "log", description: str = "") -> Artifact:
        digest, size = hashlib.sha256(), 0
        with open(path, "rb") as fh:  # streamed: a log may be large
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
        rel = Path(path).resolve().relative_to(Path(evidence_dir).resolve()).as_posix()
        return Artifact(rel, digest.hexdigest(), size, kind, description)


@dataclass(frozen=True)
class CheckOutcome:
    """One check instance at one scope point, and what happened to it.

    `measurements` is kind-specific; docs/evidence.md lists the keys reporters read per kind.
    """

    id: str  # stable id of the check instance, e.g. "evals/mrcr@accelerator=cpu,tensor_parallel=1"
    kind: str  # scope_diff | switch | kernels | stress | sanitizer | evals | divergence | features | speculative | benchmarks
    name: str  # human name of the check (test, eval or probe name)
    status: Status
    scope_point: Mapping[str, Any] | None = None  # the dimensions of the scope point, or None for global checks
    scope_point_id: str | None = None  # stable id of the scope point
    required: bool = True  # does this outcome count towards the verdict
    reason_code: str | None = None  # one of REASON_CODES when not passed
    reason: str | None = None  # one human sentence: why it failed, errored or did not run
    started_at: str | None = None  # ISO 8601 UTC
    duration_s: float = 0.0
    measurements: Mapping[str, Any] = field(default_factory=dict)
    artifacts: tuple[Artifact, ...] = ()
    inputs_digest: str | None = None  # digest of the inputs, for --resume reuse
    # requests to a target server retried by fasttrack.targets.http: {"count": n, "reasons": {why: n}}
    retries: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "status": self.status.value,
            "scope_point": dict(self.scope_point) if self.scope_point is not None else None,
            "scope_point_id": self.scope_point_id,
            "required": self.required,
            "reason_code": self.reason_code,
            "reason": self.reason,
            "started_at": self.started_at,
            "duration_s": round(float(self.duration_s), 6),
            "measurements": _plain(self.measurements),
            "artifacts": [a.__dict__.copy() for a in self.artifacts],
            "inputs_digest": self.inputs_digest,
        }
        if self.retries is not None:  # absent: no request of this check was retried
            data["retries"] = _plain(self.retries)
        return data

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> CheckOutcome:
        return CheckOutcome(
            id=d["id"],
            kind=d["kind"],
            name=d["name"],
            status=Status(d["status"]),
            scope_point=d.get("scope_point"),
            scope_point_id=d.get("scope_point_id"),
            required=d.get("required", True),
            reason_code=d.get("reason_code"),
            reason=d.get("reason"),
            started_at=d.get("started_at"),
            duration_s=d.get("duration_s", 0.0),
            measurements=d.get("measurements") or {},
            artifacts=tuple(Artifact(**a) for a in d.get("artifacts", ())),
            inputs_digest=d.get("inputs_digest"),
            retries=d.get("retries"),
        )


@dataclass(frozen=True)
class VerdictRecord:
    status: Verdict
    reasons: tuple[str, ...]  # one line each, most important first
    counts: Mapping[str, int]  # outcomes per status, required checks only
    # Each rival arm's verdict (fasttrack.evidence.arms.arm_summaries): {"arm", "status", "counts",
    # "reason"}, in the manifest's order; empty (and not written) without rival arms.
    arms: tuple[Mapping[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"status": self.status.value, "reasons": list(self.reasons), "counts": dict(self.counts)}
        if self.arms:
            data["arms"] = [dict(a) for a in self.arms]
        return data

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> VerdictRecord:
        arms = tuple(dict(a) for a in d.get("arms") or () if isinstance(a, Mapping))
        return VerdictRecord(Verdict(d["status"]), tuple(d["reasons"]), dict(d["counts"]), arms)


@dataclass(frozen=True)
class ManifestRecord:
    path: str  # as given on the command line, relative to the repository root where possible
    sha256: str  # of the manifest file's bytes
    optimisation_id: str
    title: str
    model_id: str
    switch: str  # the switch's name, e.g. latency_specialized (several: comma-separated)
    data: Mapping[str, Any]  # the manifest as loaded (plain JSON), so reports need no other file

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "sha256": self.sha256,
            "optimisation_id": self.optimisation_id,
            "title": self.title,
            "model_id": self.model_id,
            "switch": self.switch,
            "data": _plain(self.data),
        }


@dataclass(frozen=True)
class GitRecord:
    base: str | None  # base commit sha (or None when not given)
    head: str | None  # head commit sha
    dirty: bool  # uncommitted changes when the run started
    changed_files: tuple[str, ...] = ()  # base...head
    base_source: str | None = (
        None  # how the base was chosen ("--base REF", "merge-base of HEAD with origin/main") or why there is none
    )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "base": self.base,
            "head": self.head,
            "dirty": self.dirty,
            "changed_files": list(self.changed_files),
        }
        if self.base_source is not None:  # absent in evidence written before it was recorded
            data["base_source"] = self.base_source
        return data


@dataclass(frozen=True)
class RunRecord:
    id: str  # unique id of this run
    started_at: str
    finished_at: str | None
    state: str  # running | complete | interrupted | crashed
    argv: tuple[str, ...] = ()
    shard: tuple[int, int] | None = None  # (index, count), 1-based
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    hardware: tuple[str, ...] = ()  # accelerators selected with --hardware (empty: every declared one)
    eval_limits: tuple[tuple[str, int | None], ...] = ()  # --eval-limit overrides: (eval id, items or None = all)
    resume: str | None = None  # with --resume: what the earlier evidence gave, or why nothing of it was reused

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "state": self.state,
            "argv": list(self.argv),
            "shard": {"index": self.shard[0], "count": self.shard[1]} if self.shard else None,
            "only": list(self.only),
            "skip": list(self.skip),
        }
        if self.hardware:  # absent: every declared accelerator (and in evidence older than --hardware)
            data["hardware"] = list(self.hardware)
        if self.eval_limits:  # absent: every eval ran at the manifest's limit
            data["eval_limits"] = dict(self.eval_limits)
        if self.resume is not None:  # absent: not a --resume run
            data["resume"] = self.resume
        return data

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> RunRecord:
        shard = d.get("shard")
        return RunRecord(
            id=d["id"],
            started_at=d["started_at"],
            finished_at=d.get("finished_at"),
            state=d["state"],
            argv=tuple(d.get("argv", ())),
            shard=(shard["index"], shard["count"]) if shard else None,
            only=tuple(d.get("only", ())),
            skip=tuple(d.get("skip", ())),
            hardware=tuple(d.get("hardware", ())),
            eval_limits=tuple((d.get("eval_limits") or {}).items()),
            resume=d.get("resume"),
        )


@dataclass(frozen=True)
class PlanRecord:
    """What the planner decided from the manifest that a reviewer must see without manifest code."""

    # Checks the manifest runs at fewer hardware setups than its scope (``points``):
    # [{"check": "evals mrcr", "points": {"tensor_parallel": [1]}}]
    narrowed: tuple[Mapping[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"narrowed": [_plain(n) for n in self.narrowed]}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> PlanRecord:
        return PlanRecord(tuple(d.get("narrowed") or ()))


@dataclass(frozen=True)
class Evidence:
    """The whole record of one gate run (schemas/evidence.schema.json)."""

    run: RunRecord
    manifest: ManifestRecord
    git: GitRecord
    environment: Mapping[str, Any]  # fasttrack.environment.Environment.to_dict()
    scope_points: tuple[Mapping[str, Any], ...]  # declared scope points: {"id": str, "dims": {...}}
    checks: tuple[CheckOutcome, ...]
    verdict: VerdictRecord
    tool_version: str = __version__
    plan: PlanRecord | None = None  # absent in evidence written before the plan was recorded
    # The engine build: {"declared": build, "baseline": build, "candidate": build, "conflicts": [...]},
    # each build {version, commit, image_digest, source}; None when nothing was recorded.
    engine_build: Mapping[str, Any] | None = None
    # The builds of target.dependencies: {name: {version, commit, source, required?, unmet?, error?}}.
    dependencies: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {
            "$schema": SCHEMA_ID,
            "version": EVIDENCE_VERSION,
            "tool": {"name": "fasttrack", "version": self.tool_version},
            "run": self.run.to_dict(),
            "manifest": self.manifest.to_dict(),
            "git": self.git.to_dict(),
            "environment": _plain(self.environment),
            "scope_points": [_plain(p) for p in self.scope_points],
            "checks": [c.to_dict() for c in self.checks],
            "verdict": self.verdict.to_dict(),
        }
        if self.plan is not None:
            data["plan"] = self.plan.to_dict()
        if self.engine_build:
            data["engine_build"] = _plain(self.engine_build)
        if self.dependencies:
            data["dependencies"] = _plain(self.dependencies)
        return data

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Evidence:
        if d.get("version") != EVIDENCE_VERSION:
            raise EvidenceError(
                f"unsupported evidence version {d.get('version')!r}; this fasttrack reads {EVIDENCE_VERSION}"
            )
        m, g = d["manifest"], d["git"]
        return Evidence(
            run=RunRecord.from_dict(d["run"]),
            manifest=ManifestRecord(
                m["path"], m["sha256"], m["optimisation_id"], m["title"], m["model_id"], m["switch"], m["data"]
            ),
            git=GitRecord(
                g.get("base"),
                g.get("head"),
                bool(g.get("dirty")),
                tuple(g.get("changed_files", ())),
                g.get("base_source"),
            ),
            environment=d["environment"],
            scope_points=tuple(d.get("scope_points", ())),
            checks=tuple(CheckOutcome.from_dict(c) for c in d["checks"]),
            verdict=VerdictRecord.from_dict(d["verdict"]),
            tool_version=d["tool"]["version"],
            plan=PlanRecord.from_dict(d["plan"]) if isinstance(d.get("plan"), Mapping) else None,
            engine_build=d.get("engine_build") if isinstance(d.get("engine_build"), Mapping) else None,
            dependencies=d.get("dependencies") if isinstance(d.get("dependencies"), Mapping) else None,
        )

    def with_checks(self, checks: Iterable[CheckOutcome], **run_changes: Any) -> Evidence:
        """A copy with these outcomes, the verdict recomputed (each rival arm's too), and optional
        run-record changes."""
        from fasttrack.evidence.arms import arm_summaries

        checks = tuple(checks)
        run = replace(self.run, **run_changes) if run_changes else self.run
        verdict = compute_verdict(checks, run_state=run.state)
        verdict = replace(verdict, arms=arm_summaries(checks, self.manifest.data, run.state))
        return replace(self, checks=checks, run=run, verdict=verdict)

    @property
    def digest(self) -> str:
        return hashlib.sha256(canonical_bytes(self.to_dict())).hexdigest()


# ---------------------------------------------------------------------------------------------
# Verdict


def compute_verdict(checks: Iterable[CheckOutcome], run_state: str = "complete") -> VerdictRecord:
    """Fail closed: PASS only when every required outcome passed and the run completed.

    FAIL when any required outcome failed; INCOMPLETE when anything required errored or did not
    run, when there is nothing to judge, or when the run did not complete.
    """
    required = [c for c in checks if c.required]
    counts = {s.value: 0 for s in Status}
    for c in required:
        counts[c.status.value] += 1
    failed = [c for c in required if c.status is Status.FAILED]
    unfinished = [c for c in required if c.status in (Status.ERRORED, Status.NOT_RUN)]
    reasons: list[str] = []
    for c in failed:
        reasons.append(f"failed: {c.id}: {c.reason or 'no reason recorded'}")
    for c in unfinished:
        code = f"({c.reason_code}) " if c.reason_code else ""
        reasons.append(f"{c.status.value}: {c.id}: {code}{c.reason or 'no reason recorded'}")
    if failed:
        status = Verdict.FAIL
    elif unfinished or not required or run_state != "complete":
        status = Verdict.INCOMPLETE
        if not required:
            reasons.insert(0, "no required check outcomes were recorded")
        if run_state != "complete":
            reasons.insert(0, f"the run did not complete (state: {run_state})")
    else:
        status = Verdict.PASS
        reasons.append(f"all {len(required)} required check outcomes passed")
    return VerdictRecord(status, tuple(reasons), counts)


# ---------------------------------------------------------------------------------------------
# Serialisation


def _plain(value: Any) -> Any:
    """Turn mappings/tuples/enums into plain JSON values (rejecting NaN and infinities)."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {_utf8(str(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None  # JSON has no NaN; a reporter shows "n/a"
        return value
    if isinstance(value, str) and not value.isascii():
        return _utf8(value)
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return _plain(value.item())
    return value


def _utf8(text: str) -> str:
    """Text as UTF-8 can hold it: a file name that is not UTF-8 reaches Python with surrogate
    escapes (bad\\udcffname); evidence records its bytes as ``\\xff`` instead of failing to encode."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that no file name produced
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def canonical_bytes(data: Mapping[str, Any]) -> bytes:
    """The one serialisation of evidence: sorted keys, one-space indent, UTF-8, trailing newline."""
    text = json.dumps(_plain(data), sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")
