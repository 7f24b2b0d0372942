"""The parrot kind's own section of the report: a table, laid out by the report without a template
of its own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.report.format import short_point
from fasttrack.report.sections import Outcomes, ReportSection, Table
from support.parrot_kind.measurements import ParrotMeasurements


def table(evidence: Mapping[str, Any], outcomes: Outcomes) -> Table:
    rows = []
    for c in outcomes:
        m = ParrotMeasurements.of(c)
        rows.append((short_point(c.get("scope_point")), c["status"], m.said or "", m.heard or ""))
    return Table("parrot", "Parrots", ("scope point", "status", "said", "heard"), tuple(rows))


SECTION = ReportSection(table=table)
