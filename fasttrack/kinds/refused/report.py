"""Refused combinations in the report: per combination the switch, what was added to the
candidate's server, how the server ended and whether its log showed the declared message; a
table of its own in report.html and in summary.md, from the evidence alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.refused.measurements import RefusedMeasurements
from fasttrack.report.format import short_point
from fasttrack.report.sections import MarkdownTable, Outcomes, ReportSection, Table

COLUMNS = ("scope point", "switch", "combination", "status", "server", "message in its log")


def _combination(m: RefusedMeasurements) -> str:
    words = [str(a) for a in m.serve_args or ()]
    words += [f"{k}={v}" for k, v in (m.env or {}).items()]
    return " ".join(words) or "?"


def _ended(m: RefusedMeasurements) -> str:
    if m.served:
        return "served"
    if m.served is None:
        return "not started"
    if m.exit_code is None:
        return "neither served nor exited"
    return f"exited {m.exit_code:g} before serving"


def _message(m: RefusedMeasurements) -> str:
    if m.message_found is None:
        return f"/{m.message or ''}/ not searched"
    if m.message_found:
        return f"/{m.message or ''}/ found: {m.matched_line or ''}"[:240]
    return f"/{m.message or ''}/ not found"


def rows(outcomes: Outcomes) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for c in outcomes:
        m = RefusedMeasurements.of(c)
        found.append(
            (
                short_point(c.get("scope_point")),
                m.switch or "?",
                _combination(m),
                str(c.get("status", "?")),
                _ended(m),
                _message(m),
            )
        )
    return found


def table(evidence: Mapping[str, Any], outcomes: Outcomes) -> Table | None:
    if not outcomes:
        return None
    return Table(
        "refused",
        "Refused combinations",
        COLUMNS,
        tuple(rows(outcomes)),
        note="Each combination must make the candidate's server exit non-zero before it serves, "
        "with the declared message in its log; a server that serves it, crashes without the message "
        "or hangs fails.",
    )


def markdown(evidence: Mapping[str, Any], outcomes: Outcomes) -> list[MarkdownTable]:
    if not outcomes:
        return []
    return [("Refused combinations", list(COLUMNS), [list(r) for r in rows(outcomes)])]


SECTION = ReportSection(table=table, markdown=markdown, markdown_before_failures=True)
