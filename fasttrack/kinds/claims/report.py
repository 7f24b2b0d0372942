"""Benchmark claims in the reports: the claims table (what is claimed, what was measured, the
labels), the reviewer's checklist item for labelled claims, the claims table of summary.md and
the claims lines of summary.txt."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fasttrack.kinds.claims.measurements import ClaimMeasurements
from fasttrack.report.format import human
from fasttrack.report.sections import MarkdownTable, Outcomes, ReportSection

if TYPE_CHECKING:
    from fasttrack.evidence import CheckOutcome


def claim_row(c: Mapping[str, Any]) -> dict[str, Any]:
    m = ClaimMeasurements.of(c)
    return {
        "id": str(m.claim_id or c["name"]),
        "statement": str(m.statement or ""),
        "claimed": human(m.claimed),
        "measured": human(m.measured),
        "labels": [label.replace("_", " ") for label in m.labels or ()],
        "status": str(m.status or c["status"]).replace("_", " "),
    }


def claims(evidence: Mapping[str, Any], outcomes: Outcomes) -> Mapping[str, Any]:
    labelled = [c for c in outcomes if ClaimMeasurements.of(c).labels]
    return {"rows": [claim_row(c) for c in outcomes], "labelled": len(labelled)}


def checklist(data: Mapping[str, Any]) -> list[str]:
    if not data.get("labelled"):
        return []
    return [
        f"{data['labelled']} benchmark claim(s) carry labels (synthetic acceptance, prefill excluded, not comparable): "
        "is the wording of each headline honest?"
    ]


def markdown(evidence: Mapping[str, Any], outcomes: Outcomes) -> list[MarkdownTable]:
    """summary.md's claims table: (title, header, rows)."""
    if not outcomes:
        return []
    rows = []
    for c in outcomes:
        m = ClaimMeasurements.of(c)
        rows.append([m.statement or c["name"], m.status or c["status"], ", ".join(m.labels or ())])
    return [("Benchmark claims", ["claim", "status", "labels"], rows)]


def summary(outcomes: Sequence[CheckOutcome]) -> list[str]:
    """The claims lint, one line per claim (flags and labels for the reviewer; not in the verdict
    unless a claim is malformed), and the benchmarks' judgement of claims they measured."""
    lint = [o for o in outcomes if ClaimMeasurements.read(o.measurements).lint]
    judged = [o for o in outcomes if not ClaimMeasurements.read(o.measurements).lint]
    if not lint and not judged:
        return []
    lines = ["claims (labels for the reviewer; not counted in the verdict):"]
    for o in lint:
        lines.append(f"  {ClaimMeasurements.read(o.measurements).assessment or o.name}")
    for o in judged:
        status = str(ClaimMeasurements.read(o.measurements).status or o.status.value).replace("_", " ")
        lines.append(
            f"  claim {o.name!r} at {o.scope_point_id or 'global'}: {status}" + (f": {o.reason}" if o.reason else "")
        )
    return lines


SECTION = ReportSection(html=claims, checklist=checklist, markdown=markdown, summary=summary)
