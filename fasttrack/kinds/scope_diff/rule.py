"""Code confinement: the violations are re-derived from the recorded changed files and the
manifest's ``model.code_paths``/``allowed_paths`` with the runner's own matcher; passed needs
none, failed needs one, and the changed files must be the ones the evidence's git record lists."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.reading import Subject, status
from fasttrack.kinds.scope_diff.confine import confine
from fasttrack.kinds.scope_diff.measurements import ScopeDiffMeasurements


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    state = status(outcome)
    if state not in ("passed", "failed"):
        return []
    if str(outcome.get("id", "")).endswith("#policy"):
        return policy_check(outcome, state)
    m = ScopeDiffMeasurements.of(outcome)
    changed = m.changed
    if changed is None:
        return [f"{state}, but it records no list of changed files"]
    model = subject.manifest.model
    manifest_path = (subject.evidence.get("manifest") or {}).get("path")
    found = [v["path"] for v in confine(changed, model.code_paths, model.allowed_paths, manifest_path).violations]
    problems = []
    recorded = sorted(str(v.path) for v in m.violations or ())
    if recorded != sorted(found):
        problems.append(f"it records violations {recorded}; its changed files give {sorted(found)}")
    listed = (subject.evidence.get("git") or {}).get("changed_files")
    if isinstance(listed, list) and sorted(listed) != sorted(changed):
        problems.append("its changed files are not the ones the evidence's git record lists")
    if state == "passed" and found:
        problems.append(f"passed, but {len(found)} changed file(s) lie outside the code paths: {', '.join(found[:5])}")
    if state == "failed" and not found:
        problems.append("failed, but no changed file lies outside the code paths")
    return problems


def policy_check(outcome: Mapping[str, Any], state: str) -> list[str]:
    """The policy outcome (--policy-from): failed exactly when a loosening change is unaccepted."""
    m = outcome.get("measurements") or {}
    changes = m.get("changes")
    if not isinstance(changes, list) or "accepted" not in m:
        return [f"{state}, but it records no list of policy changes"]
    refused = any(isinstance(c, Mapping) and c.get("loosens") for c in changes) and m.get("accepted") is not True
    if state == "passed" and refused:
        return ["passed, but it records a change that loosens the gate's policy, not accepted"]
    if state == "failed" and not refused:
        return ["failed, but it records no unaccepted change that loosens the gate's policy"]
    if not outcome.get("required", True):
        return ["the policy outcome must be required"]
    return []
