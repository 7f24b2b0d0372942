"""Code confinement in the report: the changed files, which lie outside the model's paths, and
the gated shared files the reviewer reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.scope_diff.measurements import ScopeDiffMeasurements
from fasttrack.report.format import strings
from fasttrack.report.sections import Outcomes, ReportSection


def confinement(evidence: Mapping[str, Any], outcomes: Outcomes) -> Mapping[str, Any]:
    m = ScopeDiffMeasurements.of(outcomes[0]) if outcomes else ScopeDiffMeasurements.read({})
    changed = list(m.changed or ()) or strings(evidence["git"].get("changed_files"))
    violations = [{"path": "?" if v.path is None else v.path, "reason": v.reason or ""} for v in m.violations or ()]
    bad = {v["path"] for v in violations}
    return {
        "ran": bool(outcomes),
        "status": outcomes[0]["status"] if outcomes else None,
        "reason": outcomes[0].get("reason") if outcomes else None,
        "files": [{"path": p, "ok": p not in bad} for p in changed],
        "violations": violations,
        "code_paths": list(m.code_paths or ()),
        "allowed_paths": list(m.allowed_paths or ()),
        "gated_paths": list(m.gated_paths or ()),
        "gated": list(m.gated or ()),  # shared files changed behind the switches, for the reviewer
    }


def checklist(data: Mapping[str, Any]) -> list[str]:
    if not data.get("violations"):
        return []
    return [f"{len(data['violations'])} changed file(s) lie outside the model's code paths: justify or move them."]


SECTION = ReportSection(html=confinement, checklist=checklist)
