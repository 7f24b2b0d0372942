"""What a check kind contributes to the reports: its `ReportSection` (``Kind.report``), built in
the kind's package (``fasttrack/kinds/<kind>/report.py``) from evidence alone, with the helpers
of `fasttrack.report.format`. Every part is optional:

- ``html``: the data of the kind's part of report.html, from the evidence and the kind's outcomes
  (the built-in kinds' parts are laid out by the report's template);
- ``table``: a table of its own (title, columns, rows) that the report shows after the built-in
  sections: what a new kind needs to appear in the report without touching the template;
- ``checklist``: items for the reviewer's checklist, from its ``html`` data;
- ``speedup``: the speed-up one outcome measured, for the where-it-works grid;
- ``summary``: lines of summary.txt; ``markdown``: tables of summary.md's details (results above
  the failed and errored outcomes, notes below them);
- ``trend``: a value per run for the dashboard's trend line;
- ``underpowered``: the first screen's words for its underpowered outcomes (what decides them);
  ``deciding_time_scale``: the --timeout-scale a run deciding them needs, from what this run
  measured (the first screen's next command).

The reporters receive the kinds (they never import them) and ask each kind's section in the
registry's order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from fasttrack.evidence import CheckOutcome

Outcomes = Sequence[Mapping[str, Any]]  # one kind's outcomes, plain evidence JSON
MarkdownTable = tuple[str, list[str], list[list[Any]]]  # (title, header, rows) of summary.md


@dataclass(frozen=True)
class Speedup:
    """A speed-up an outcome timed (None: no ratio recorded) and its interval (None: not estimated)."""

    value: float | None
    low: float | None
    high: float | None
    bounds: str = "interval"  # what low/high are, e.g. "one-sided 99.9% bounds"


@dataclass(frozen=True)
class Table:
    """A kind's own section of the report: a title, column names and rows of text."""

    anchor: str  # the section's id in report.html
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""


@dataclass(frozen=True)
class ReportSection:
    html: Callable[[Mapping[str, Any], Outcomes], Mapping[str, Any]] | None = None
    table: Callable[[Mapping[str, Any], Outcomes], Table | None] | None = None
    checklist: Callable[[Mapping[str, Any]], list[str]] | None = None
    speedup: Callable[[Mapping[str, Any]], Speedup | None] | None = None
    summary: Callable[[Sequence[CheckOutcome]], list[str]] | None = None
    markdown: Callable[[Mapping[str, Any], Outcomes], list[MarkdownTable]] | None = None
    markdown_before_failures: bool = False  # a table of results, above the failed and errored outcomes
    trend: Callable[[Mapping[str, Any], Outcomes], tuple[str | None, float | None]] | None = None
    underpowered: Callable[[Outcomes], str] | None = None
    deciding_time_scale: Callable[[Mapping[str, Any], Outcomes, float], float | None] | None = None


class Reported(Protocol):
    """What the reporters need of a check kind (`fasttrack.kinds.base.Kind` has it)."""

    @property
    def name(self) -> str: ...
    @property
    def letter(self) -> str: ...
    @property
    def audit(self) -> bool: ...
    @property
    def exercises(self) -> str: ...  # end_to_end, kernel or static (the coverage map)
    @property
    def report(self) -> ReportSection | None: ...


Kinds = Mapping[str, Reported]  # the registry, as the reporters receive it


def of_kind(checks: Sequence[Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    return [c for c in checks if c.get("kind") == kind]
