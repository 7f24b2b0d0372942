"""Verify evidence, so that a CI runner without GPUs can require evidence made on GPU machines.

Checks, each reported: the file is canonical; its sha256 equals the digest recorded in the
attestation (or the sidecar); the attestation's signature, when there is one; the manifest and
head commit are the ones given; the recorded hardware is inside the manifest's declared scope;
the run covered the whole scope (not narrowed by --only/--skip/--hardware, unless allowed);
each outcome's status follows from its own measurements (``fasttrack.verification``, per kind);
the outcomes are exactly the plan the manifest gives for the recorded selection (re-planned
from the manifest copy in the evidence, or --manifest, without this machine's hardware); the
recorded verdict follows from the outcomes; and the verdict is PASS. Fail closed: evidence with
no recorded digest does not verify, and a mismatch fails it, signed or not.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.attest import AttestationPaths, paths_for, read_statement, verify_signature
from fasttrack.errors import ManifestError, UsageError
from fasttrack.evidence import Evidence, canonical_bytes, compute_verdict, parse_evidence, read_evidence_bytes
from fasttrack.evidence.counts import RunCounts
from fasttrack.fileio import MANIFEST_MAX_BYTES, SIDECAR_MAX_BYTES, InputTooLarge, read_capped

if TYPE_CHECKING:
    from fasttrack.kinds.base import Kinds
    from fasttrack.manifest import Manifest
    from fasttrack.plan import Plan


@dataclass(frozen=True)
class VerifyOptions:
    evidence: Path
    manifest: Path | None = None
    head: str | None = None
    allowed_signers: Path | None = None
    hardware_from_manifest: bool = False  # judge hardware against --manifest, not the embedded copy
    allow_partial: bool = (
        False  # accept a run narrowed by --only/--skip/--hardware (its PASS covers only part of the scope)
    )
    require_manifest: bool = False  # CI mode (CI=true): the evidence's own manifest copy is not trusted
    policy_from: str | None = None  # the git ref whose manifest holds the gate's policy (the PR's base)
    accept_policy_change: bool = False  # a reviewer accepted the PR's looser policy


@dataclass(frozen=True)
class Finding:
    name: str
    ok: bool
    message: str


@dataclass(frozen=True)
class VerifyResult:
    findings: tuple[Finding, ...]
    evidence: Mapping[str, Any] = field(default_factory=dict, compare=False)  # as read, for the caller's words

    @property
    def ok(self) -> bool:
        return bool(self.findings) and all(f.ok for f in self.findings)

    @property
    def failures(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.ok)


def verify(options: VerifyOptions, kinds: Kinds) -> VerifyResult:
    paths = paths_for(options.evidence)
    raw = read_evidence_bytes(paths.evidence)  # bad input: EvidenceError, exit 2
    evidence = parse_evidence(raw, str(paths.evidence), kinds=kinds)
    digest = hashlib.sha256(raw).hexdigest()
    findings = [
        _canonical(raw),
        *_digest_and_signature(paths, digest, options.allowed_signers),
    ]
    if options.manifest is not None:
        findings.append(_manifest(evidence, Path(options.manifest)))
    elif options.require_manifest:
        findings.append(Finding("manifest", False, UNTRUSTED_COPY + "; in CI mode (CI=true) give --manifest"))
    if options.head is not None:
        findings.append(_head(evidence, options.head))
    hardware = _hardware_entries(
        evidence,
        Path(options.manifest) if options.hardware_from_manifest and options.manifest else None,
        options.hardware_from_manifest,
    )
    findings.append(_merged_hardware(evidence) or _hardware(evidence.get("environment") or {}, hardware))
    findings.append(_whole_scope(evidence, options.allow_partial))
    findings.extend(_rederived(evidence, options, paths.evidence.parent, kinds))
    findings.append(artifacts_finding(evidence, paths.evidence.parent))
    findings.append(_verdict_consistent(evidence))
    status = evidence["verdict"]["status"]
    findings.append(Finding("verdict", status == "PASS", f"verdict is {status}: {_counts(evidence)}"))
    return VerifyResult(tuple(findings), evidence)


def _counts(evidence: Mapping[str, Any]) -> str:
    """The counts in the words the terminal and the report use (`fasttrack.evidence.counts`)."""
    counts = RunCounts.of(evidence)
    return f"{counts.headline()} ({counts.sizes()})"


def _merged_hardware(evidence: Mapping[str, Any]) -> Finding | None:
    """A merged run's outcomes ran on several machines; its recorded environment is one part's.
    Name every accelerator the outcomes that ran were measured at (None: not a merged run)."""
    argv = evidence["run"].get("argv") or []
    if len(argv) < 2 or argv[1] != "merge":
        return None
    ran: dict[str, int] = {}
    for c in evidence["checks"]:
        point = c.get("scope_point") or {}
        if c.get("status") in ("passed", "failed", "errored") and point.get("accelerator"):
            ran[str(point["accelerator"])] = ran.get(str(point["accelerator"]), 0) + 1
    where = ", ".join(f"{name} ({n} outcomes)" for name, n in sorted(ran.items())) or "no accelerator-specific outcome"
    return Finding(
        "hardware", True, f"merged run: outcomes ran on {where} (the plan finding matches them to the declared scope)"
    )


UNTRUSTED_COPY = (
    "no --manifest given: the plan and the pass rules come from the manifest copy inside the "
    "evidence, which whoever wrote the evidence controls"
)


def artifacts_finding(evidence: Mapping[str, Any], folder: Path) -> Finding:
    """Every artifact's file is in the folder (no symlink followed) with its recorded sha256."""
    from fasttrack.evidence.artifacts import artifact_problems

    count = sum(len(c.get("artifacts") or ()) for c in evidence.get("checks") or ())
    problems = artifact_problems(evidence, folder)
    if not problems:
        return Finding("artifacts", True, f"{count} artifact reference(s), each file matching its recorded sha256")
    more = f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
    return Finding(
        "artifacts", False, f"{len(problems)} artifact(s) not as recorded: " + "; ".join(problems[:3]) + more
    )


def _canonical(raw: bytes) -> Finding:
    try:
        same = canonical_bytes(json.loads(raw.decode("utf-8"))) == raw
    except ValueError:
        same = False
    return Finding(
        "canonical",
        same,
        "file is canonical JSON"
        if same
        else "file is not canonical JSON (re-serialising changes its bytes): it was edited after it was written",
    )


def digest_finding(paths: AttestationPaths, digest: str) -> Finding:
    """Whether the file's sha256 is the one the attestation (or else the sidecar) records."""
    recorded, source = None, None
    if paths.statement.is_file():
        statement = read_statement(paths.statement)
        subjects = [
            s for s in statement.get("subject", []) if isinstance(s, dict) and s.get("name") == paths.evidence.name
        ]
        recorded = subjects[0].get("digest", {}).get("sha256") if subjects else None
        source = paths.statement.name
    elif paths.sidecar.is_file():
        words = _sidecar_words(paths.sidecar)
        recorded = words[0] if words else None
        source = paths.sidecar.name
    if source is None:
        return Finding(
            "digest",
            False,
            f"no recorded digest: neither {paths.statement.name} nor {paths.sidecar.name} "
            "is beside the evidence (run `fasttrack attest`)",
        )
    if recorded != digest:
        return Finding(
            "digest",
            False,
            f"sha256 {digest[:16]}… does not match {recorded and recorded[:16]}… recorded in {source}: "
            "the evidence changed after it was attested",
        )
    return Finding("digest", True, f"sha256 {digest} matches {source}")


def _digest_and_signature(paths: AttestationPaths, digest: str, allowed_signers: Path | None) -> list[Finding]:
    out = [digest_finding(paths, digest)]
    if paths.statement.is_file() and paths.sidecar.is_file():
        side = _sidecar_words(paths.sidecar)
        if not side or side[0] != digest:
            out.append(Finding("sidecar", False, f"{paths.sidecar.name} does not match the evidence's sha256"))
    signed = paths.signature.is_file()
    if allowed_signers is not None:
        if not Path(allowed_signers).is_file():
            raise UsageError(f"{allowed_signers}: allowed-signers file not found")
        if not signed:
            out.append(
                Finding(
                    "signature",
                    False,
                    f"--allowed-signers given but {paths.signature.name} is missing: evidence is unsigned",
                )
            )
        else:
            ok, message = verify_signature(paths.statement, paths.signature, Path(allowed_signers))
            out.append(Finding("signature", ok, message))
    elif signed:
        out.append(
            Finding("signature", False, f"{paths.signature.name} is present but not checked: pass --allowed-signers")
        )
    return out


def _sidecar_words(path: Path) -> list[str]:
    try:
        return read_capped(path, SIDECAR_MAX_BYTES).decode("utf-8", "replace").split()
    except (OSError, InputTooLarge):
        return []


def _manifest(evidence: Mapping[str, Any], manifest: Path) -> Finding:
    try:
        actual = hashlib.sha256(read_capped(manifest, MANIFEST_MAX_BYTES)).hexdigest()
    except InputTooLarge as err:
        raise UsageError(f"{manifest}: the manifest is {err}") from None
    except OSError as err:
        raise UsageError(f"{manifest}: cannot read the manifest: {err.strerror}") from None
    recorded = evidence["manifest"]["sha256"]
    if actual == recorded:
        return Finding("manifest", True, f"{manifest.name} matches the manifest the run checked")
    return Finding(
        "manifest",
        False,
        f"{manifest} (sha256 {actual[:16]}…) is not the manifest the run checked "
        f"({evidence['manifest']['path']}, sha256 {recorded[:16]}…)",
    )


def _head(evidence: Mapping[str, Any], head: str) -> Finding:
    recorded = evidence["git"].get("head") or ""
    wanted = head.strip().lower()
    ok = bool(recorded) and len(wanted) >= 7 and recorded.lower().startswith(wanted)
    return Finding("head", ok, f"head commit {recorded or 'unrecorded'}" + ("" if ok else f" is not {head}"))


def _hardware_entries(
    evidence: Mapping[str, Any], manifest: Path | None, from_manifest: bool
) -> Sequence[Mapping[str, Any]]:
    if from_manifest:
        if manifest is None:
            raise UsageError("--hardware-from-manifest needs --manifest")
        from fasttrack.manifest import load_manifest

        data = load_manifest(manifest).data  # bad input: ManifestError (file:line), exit 2
    else:
        data = evidence["manifest"].get("data") or {}
    hardware = ((data.get("scope") or {}) if isinstance(data, Mapping) else {}).get("hardware") or []
    return [h for h in hardware if isinstance(h, Mapping)]


def _norm(name: Any) -> str:
    return " ".join(str(name).lower().replace("-", " ").replace("_", " ").split())


def _recorded_hardware(env: Mapping[str, Any]) -> tuple[str, int | None]:
    """(accelerator name, device count) from an Environment.to_dict(), tolerating older shapes."""
    accs = env.get("accelerators")
    name = env.get("accelerator")
    if not name and isinstance(accs, list) and accs:
        first = accs[0]
        name = first.get("name") if isinstance(first, Mapping) else first
    count = env.get("accelerator_count", env.get("device_count"))
    if count is None and isinstance(accs, list):
        count = len(accs)
    return str(name or "unknown"), count if isinstance(count, int) else None


def _hardware(env: Mapping[str, Any], entries: Sequence[Mapping[str, Any]]) -> Finding:
    name, count = _recorded_hardware(env)
    if not entries:
        return Finding(
            "hardware", False, "the manifest declares no scope.hardware: cannot tell whether the run was in scope"
        )
    for entry in entries:
        declared = _norm(entry.get("accelerator", ""))
        if not declared:
            continue
        if declared == "cpu":
            if _norm(name) == "cpu":
                return Finding("hardware", True, "ran on cpu, which the scope declares")
            continue
        if declared not in _norm(name) and _norm(name) not in declared:
            continue
        counts = entry.get("device_counts")
        if isinstance(counts, list) and count is not None and count in counts:
            return Finding("hardware", True, f"ran on {count}x {name}, inside the declared scope")
    declared_text = "; ".join(f"{e.get('accelerator')} x {e.get('device_counts')}" for e in entries)
    return Finding(
        "hardware",
        False,
        f"ran on {count if count is not None else '?'}x {name}, outside the declared scope ({declared_text})",
    )


def _whole_scope(evidence: Mapping[str, Any], allow_partial: bool) -> Finding:
    """A PASS of a partial run (--only/--skip/--hardware, one shard) is not the gate's PASS: the
    outcomes it left out are not_run(out_of_scope) and not required. Fail closed unless allowed."""
    run = evidence["run"]
    parts = []
    if run.get("only"):
        parts.append("--only " + ",".join(run["only"]))
    if run.get("skip"):
        parts.append("--skip " + ",".join(run["skip"]))
    if run.get("hardware"):
        parts.append("--hardware " + ",".join(run["hardware"]))
    if run.get("shard"):
        parts.append(f"shard {run['shard']['index']}/{run['shard']['count']}")
    left_out = [
        c["id"] for c in evidence["checks"] if c.get("reason_code") == "out_of_scope" and not c.get("required", True)
    ]
    if not parts and not left_out:
        missing = sum(1 for c in evidence["checks"] if c.get("status") == "not_run" and c.get("required", True))
        text = "the run was not narrowed (no --only, --skip, --hardware or shard)"
        if missing:
            text += f"; {missing} required outcome(s) did not run (see the verdict)"
        return Finding("whole-scope", True, text)
    what = (", ".join(parts) or "no selection recorded") + f"; {len(left_out)} outcome(s) left out and not counted"
    if allow_partial:
        return Finding("whole-scope", True, f"partial run accepted (--allow-partial): {what}")
    return Finding(
        "whole-scope",
        False,
        f"partial run ({what}): its verdict covers only part of the scope; "
        "merge the parts (fasttrack merge) or pass --allow-partial",
    )


def _verdict_consistent(evidence: Mapping[str, Any]) -> Finding:
    """The recorded verdict, and each rival arm's (``verdict.arms``), as the outcomes give them."""
    from fasttrack.evidence.arms import arm_summaries

    parsed = Evidence.from_dict(evidence)
    expected = compute_verdict(parsed.checks, run_state=parsed.run.state).status.value
    recorded = evidence["verdict"]["status"]
    if expected != recorded:
        return Finding(
            "verdict-consistent", False, f"recorded verdict {recorded} does not follow from the outcomes ({expected})"
        )
    arms = [dict(a) for a in arm_summaries(parsed.checks, parsed.manifest.data, parsed.run.state)]
    recorded_arms = [dict(a) for a in parsed.verdict.arms]
    if arms != recorded_arms:
        want = {a["arm"]: (a["status"], a["counts"]) for a in arms}
        got = {str(a.get("arm")): (a.get("status"), a.get("counts")) for a in recorded_arms}
        wrong = [arm for arm in dict.fromkeys([*want, *got]) if want.get(arm) != got.get(arm)]
        detail = (
            "; ".join(
                f"arm {arm}: recorded {_arm_words(got.get(arm))}, the outcomes give {_arm_words(want.get(arm))}"
                for arm in wrong
            )
            or "their reasons differ"
        )
        return Finding(
            "verdict-consistent", False, f"the rival arms' recorded verdicts do not follow from the outcomes: {detail}"
        )
    return Finding(
        "verdict-consistent",
        True,
        "recorded verdict follows from the outcomes"
        + (f" (so do the {len(arms)} rival arms' verdicts)" if arms else ""),
    )


def _arm_words(value: Any) -> str:
    if value is None:
        return "nothing"
    status, counts = value
    return f"{status} {dict(counts or {})}"


def manifest_for(evidence: Mapping[str, Any], manifest: Path | None, folder: Path) -> Manifest:
    """The manifest to re-derive against: ``--manifest`` when given, else the evidence's copy."""
    from fasttrack.manifest import load_manifest
    from fasttrack.manifest.loader import load_manifest_data

    if manifest is not None:
        return load_manifest(manifest)
    record = evidence["manifest"]
    return load_manifest_data(record.get("data"), str(record.get("path")), str(record.get("sha256")), folder)


def _rederived(evidence: Mapping[str, Any], options: VerifyOptions, folder: Path, kinds: Kinds) -> list[Finding]:
    manifest = options.manifest
    try:
        model = manifest_for(evidence, manifest, folder)
    except ManifestError as err:
        if manifest is not None:
            raise  # a --manifest that does not load is bad input (exit 2)
        why = "the manifest copy in the evidence does not validate: " + "; ".join(err.problems[:3])
        return [Finding("measurements", False, why), Finding("plan", False, why)]
    where = str(manifest) if manifest is not None else "the manifest copy in the evidence"
    policy: list[Finding] = []
    if options.policy_from:
        model, found = _with_policy(evidence, model, manifest, options)
        policy.append(found)
    return policy + rederived_findings(evidence, model, kinds, where)


def _with_policy(
    evidence: Mapping[str, Any], model: Manifest, manifest: Path | None, options: VerifyOptions
) -> tuple[Manifest, Finding]:
    """The manifest with the base's rules put back when the PR loosens them unaccepted, and the
    finding that says whether it does (``--policy-from``)."""
    from fasttrack.manifest.loader import find_repository_root
    from fasttrack.manifest.policy import apply_policy, headline

    assert options.policy_from is not None
    if manifest is not None:
        root = model.root
        rel = Path(manifest).resolve().relative_to(root.resolve()).as_posix()
    else:
        root, rel = find_repository_root(Path.cwd()), str(evidence["manifest"].get("path"))
    model, policy = apply_policy(model, rel, options.policy_from, options.accept_policy_change, root)
    if policy.base_sha256 is None:
        return model, Finding("policy", True, f"{rel} is new at {policy.ref}: no base policy to hold it to")
    if not policy.changes:
        return model, Finding("policy", True, f"the gate's policy is the one at {policy.ref}")
    text = headline(list(policy.changes))
    if policy.refused:
        return model, Finding(
            "policy",
            False,
            f"{text}; judged by the rules at {policy.ref}; a reviewer who "
            "accepts the change passes --accept-policy-change",
        )
    accepted = " (accepted with --accept-policy-change)" if policy.accepted else " (none loosens it)"
    return model, Finding("policy", True, text + accepted)


def rederived_findings(
    evidence: Mapping[str, Any], model: Manifest, kinds: Kinds, where: str = "the manifest", plan: Plan | None = None
) -> list[Finding]:
    """Each outcome's status from its measurements, and the outcomes against the plan (``plan``:
    the manifest's plan when the caller has built it already)."""
    from fasttrack.verification import rederive
    from fasttrack.verification.coverage import plan_problems

    findings = []
    for name, problems, ok_text, what in (
        (
            "measurements",
            rederive(evidence, model, kinds),
            "every outcome's status follows from its own measurements",
            "outcome(s) whose status their own measurements do not support",
        ),
        (
            "plan",
            plan_problems(evidence, model, kinds, plan),
            f"the outcomes are exactly the plan of {where} for the recorded selection",
            f"difference(s) between the outcomes and the plan of {where}",
        ),
    ):
        text = ok_text if not problems else f"{len(problems)} {what}: " + "; ".join(problems[:3])
        if len(problems) > 3:
            text += f"; and {len(problems) - 3} more"
        findings.append(Finding(name, not problems, text))
    return findings
