"""The first screen's what-ran matrix (fasttrack.report.matrix): kinds x hardware setups whose
cells add up to the verdict's counts, rows in registry order linked to their sections."""

from __future__ import annotations

from fasttrack.kinds.registry import KINDS
from fasttrack.report.matrix import build_matrix
from support.example_evidence import example_evidence


def test_cells_add_up_to_the_verdict_and_rows_follow_the_registry():
    evidence = example_evidence().to_dict()
    letters = {name: kind.letter for name, kind in KINDS.items()}
    audits = [name for name, kind in KINDS.items() if kind.audit]
    matrix = build_matrix(evidence["checks"], letters, audits)
    totals: dict[str, int] = {}
    for row in matrix.rows:
        for cell in row.cells:
            for status, n in (cell.counts if cell else {}).items():
                totals[status] = totals.get(status, 0) + n
    assert totals == {k: v for k, v in evidence["verdict"]["counts"].items() if v}
    kinds = [row.kind for row in matrix.rows]
    assert kinds == [k for k in KINDS if k in kinds]  # registry order
    assert all(row.letter != "?" for row in matrix.rows)
    by_kind = {row.kind: row for row in matrix.rows}
    assert by_kind["evals"].anchor == "evals" and by_kind["scope_diff"].anchor in ("audits", "outcomes")
    # a cell that did not pass says why
    assert any(cell and cell.worst == "not_run" and cell.why for row in matrix.rows for cell in row.cells)
    assert "global" not in matrix.columns[:-1]  # global checks last
