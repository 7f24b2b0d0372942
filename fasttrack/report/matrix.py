"""The first screen's "what ran" matrix: check kinds x hardware setups, each cell the outcomes
there by status (passed, failed, errored, not run) coloured by the worst required one, with the
reasons of what did not pass as its tooltip, each row linked to the kind's section. It fills the
space under the verdict box so that a reader sees at a glance what ran where."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fasttrack.report.format import hardware_label

# The report's own sections; a kind without one is found in Audits (audit kinds) or All outcomes.
SECTIONS = frozenset({"evals", "features", "kernels", "benchmarks"})
ORDER = ("failed", "errored", "not_run", "passed")
SYMBOL = {"passed": "✓", "failed": "✗", "errored": "!", "not_run": "○"}


@dataclass(frozen=True)
class Cell:
    counts: Mapping[str, int]  # required outcomes by status
    worst: str | None  # None: only outcomes that are not required here
    why: str  # the reason codes of what did not pass, most common first

    @property
    def text(self) -> str:
        return " ".join(f"{self.counts[s]}{SYMBOL[s]}" for s in ORDER if self.counts.get(s))


@dataclass(frozen=True)
class Row:
    kind: str
    letter: str
    anchor: str
    cells: tuple[Cell | None, ...]  # one per column; None: nothing of this kind there


@dataclass(frozen=True)
class Matrix:
    columns: tuple[str, ...]
    rows: tuple[Row, ...]


def build_matrix(checks: Iterable[Mapping[str, Any]], letters: Mapping[str, str], audit_kinds: Iterable[str]) -> Matrix:
    """``letters``: the registry's kinds (in its order) and their grid letters."""
    audits = set(audit_kinds)
    grouped: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    columns: dict[str, None] = {}
    for c in checks:
        column = hardware_label(c.get("scope_point"))
        columns.setdefault(column, None)
        grouped.setdefault((str(c.get("kind")), column), []).append(c)
    ordered = tuple(sorted(columns, key=lambda name: (name == "global", name)))
    kinds = [k for k in letters if any(key[0] == k for key in grouped)]
    kinds += sorted({k for k, _ in grouped} - set(kinds))
    rows = tuple(
        Row(
            kind,
            letters.get(kind, "?"),
            kind if kind in SECTIONS else ("audits" if kind in audits else "outcomes"),
            tuple(_cell(grouped.get((kind, column), [])) for column in ordered),
        )
        for kind in kinds
    )
    return Matrix(ordered, rows)


def _cell(outcomes: list[Mapping[str, Any]]) -> Cell | None:
    if not outcomes:
        return None
    required = [c for c in outcomes if c.get("required", True)]
    counts = Counter(str(c.get("status")) for c in required)
    worst = next((s for s in ORDER if counts.get(s)), None)
    why = Counter(str(c.get("reason_code") or c.get("status")) for c in required if c.get("status") != "passed")
    return Cell(dict(counts), worst, ", ".join(f"{code} ×{n}" for code, n in why.most_common(4)))
