"""Kernel tests in the report: per suite and hardware setup, one row per scope point with its
worst error ÷ tolerance over every test there and a cell per test; problem rows first; the batch
sizes the between-points instances ran; outcomes that did not run here, one line each; and the
micro-benchmarks the tests timed (a section of their own, and a table in summary.md)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.kernels.measurements import BatchSizes, KernelMeasurements, KernelTest
from fasttrack.report.format import (
    STATUS_ORDER,
    as_map,
    elsewhere_lines,
    hardware_label,
    number,
    ran_here,
    short_point,
    why,
)
from fasttrack.report.sections import MarkdownTable, Outcomes, ReportSection, Table

MAX_KERNEL_ROWS = 600  # rows over every setup (problem rows first per setup); the rest are counted


def _sci(value: Any) -> str:
    return (
        f"{value:.1e}"
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        else "n/a"
    )


def _short_test(nodeid: str) -> str:
    """Test function plus any non-scope parameters: 'test_decode[all]' for
    'path.py::test_decode[batch=1,dtype=fp32-all]' (scope values are the row, not the column)."""
    name = nodeid.split("::")[-1]
    if "[" not in name:
        return name
    func, params = name.split("[", 1)
    extra = [part for part in params.rstrip("]").split("-") if part and "=" not in part]
    return f"{func}[{'-'.join(extra)}]" if extra else func


def _ratio(t: KernelTest) -> float | None:
    """Worst absolute error ÷ atol of one test result; None when either was not recorded."""
    atol = number(t.tolerance.get("atol"))
    err = number(t.worst_error.get("abs"))
    return err / atol if atol is not None and err is not None and atol > 0 else None


def _kernel_cell(t: KernelTest) -> dict[str, Any]:
    tol = t.tolerance
    err = t.worst_error
    ratio = _ratio(t)
    outcome = t.outcome if t.outcome is not None else "?"
    bad = outcome not in ("passed", "skipped", "?")
    if ratio is not None:
        text = f"{ratio:.2f}×" + (" ✗" if bad else "")
    else:
        text = outcome.replace("_", " ")
    detail = (
        f"{outcome}: worst |err| {_sci(err.get('abs'))} vs atol {_sci(tol.get('atol'))}"
        if ratio is not None
        else outcome
    )
    if t.message:
        detail += f" — {t.message}"
    level = "bad" if bad else ("skip" if outcome == "skipped" else ("warn" if (ratio or 0) > 0.8 else "ok"))
    return {"text": text, "detail": detail, "level": level}


def _point_rest(dims: Mapping[str, Any] | None) -> str:
    """A scope point without its hardware setup (the setup heads its group): 'batch=3 dtype=fp32'."""
    rest = {k: v for k, v in as_map(dims).items() if k not in ("accelerator", "device_count", "tensor_parallel")}
    return short_point(rest) if rest else "(one point)"


def kernel_matrix(evidence: Mapping[str, Any], kernels: Outcomes) -> dict[str, Any]:
    """What the kernel tests showed, per suite and hardware setup: one row per scope point with its
    worst error ÷ tolerance over every test there, and a cell per test; problem rows first, setups
    with a problem open. Outcomes that did not run here are one line per accelerator and reason."""
    ran, elsewhere = ran_here(kernels)
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for c in ran:
        groups[(str(c.get("name")), hardware_label(c.get("scope_point")))].append(c)
    budget = MAX_KERNEL_ROWS
    setups = []
    for (suite, setup), members in groups.items():
        members = sorted(members, key=lambda c: STATUS_ORDER.get(c["status"], 9))
        tests: dict[str, None] = {}
        rows = []
        worst: tuple[float, str, str] | None = None
        for c in members:
            cells: dict[str, dict[str, Any]] = {}
            row_worst: tuple[float, str] | None = None
            m = KernelMeasurements.of(c)
            results = m.tests or ()
            for t in results:
                name = _short_test(t.nodeid if t.nodeid is not None else "?")
                tests.setdefault(name, None)
                cells[name] = _kernel_cell(t)
                ratio = _ratio(t)
                if ratio is not None and (row_worst is None or ratio > row_worst[0]):
                    row_worst = (ratio, name)
            if row_worst is not None and (worst is None or row_worst[0] > worst[0]):
                worst = (row_worst[0], row_worst[1], _point_rest(c.get("scope_point")))
            if budget > 0:
                budget -= 1
                counts = {"passed": m.passed, "failed": m.failed, "errors": m.errors, "skipped": m.skipped}
                rows.append(
                    {
                        "point": _point_rest(c.get("scope_point")),
                        "status": c["status"],
                        "reason": why(c),
                        "cells": cells,
                        "worst": f"{row_worst[0]:.2f}×" if row_worst else "–",
                        "worst_test": row_worst[1] if row_worst else "",
                        "worst_level": "bad"
                        if row_worst and row_worst[0] > 1
                        else ("warn" if row_worst and row_worst[0] > 0.8 else "ok"),
                        "tests": f"{counts['passed'] if counts['passed'] is not None else 0} passed"
                        + "".join(f", {counts.get(k)} {k}" for k in ("failed", "errors", "skipped") if counts.get(k))
                        if results
                        else "",
                    }
                )
        statuses: dict[str, int] = defaultdict(int)
        for c in members:
            statuses[c["status"]] += 1
        setups.append(
            {
                "suite": suite,
                "setup": setup,
                "points": len(members),
                "statuses": dict(statuses),
                "worst": f"{worst[0]:.2f}× ({worst[1]} at {worst[2]})" if worst else "no error/tolerance recorded",
                "problem": any(c["status"] != "passed" for c in members),
                "tests": list(tests),
                "rows": rows,
                "omitted": len(members) - len(rows),
            }
        )
    setups.sort(key=lambda g: (not g["problem"], g["suite"], g["setup"]))
    not_here = elsewhere_lines(elsewhere)
    between = [_batch_sizes_line(c) for c in ran if KernelMeasurements.of(c).batch_sizes]
    return {"setups": setups, "not_here": not_here, "ran": len(ran), "batch_sizes": between}


def _batch_sizes_line(c: Mapping[str, Any]) -> str:
    """Which batch sizes a between-points kernel instance ran (the declared ones run per point)."""
    sizes = KernelMeasurements.of(c).batch_sizes or BatchSizes.read({})
    ran, failed = [int(b) for b in sizes.ran or ()], [int(b) for b in sizes.failed or ()]
    declared = ", ".join(str(b) for b in sizes.declared or ())
    text = f"{c['name']} at {short_point(c.get('scope_point'))}: batch sizes {declared} (declared points) and "
    text += f"{len(ran)} of {len(sizes.between or ())} between them passed ({sizes.policy if sizes.policy is not None else ''})"
    return text + (f"; failed at {', '.join(map(str, failed))}" if failed else "")


MAX_MICRO_ROWS = 300  # micro-benchmark rows over every suite; the rest are counted


def _bounds(ci: tuple[float | None, ...] | None, fmt: str) -> str:
    lo, hi = (tuple(ci or ()) + (None, None))[:2]
    return f"[{format(lo, fmt) if lo is not None else '-inf'}, {format(hi, fmt) if hi is not None else 'inf'}]"


def micro_rows(outcomes: Outcomes) -> list[tuple[str, ...]]:
    """One row per suite, hardware setup, test and shape timed (a test covering fewer dimensions
    than its suite is the same run at every point that shares its values: listed once)."""
    seen: set[tuple[str, ...]] = set()
    rows: list[tuple[str, ...]] = []
    for c in outcomes:
        for b in KernelMeasurements.of(c).micro_benchmarks or ():
            point = as_map(c.get("scope_point"))
            machine = {k: point[k] for k in ("accelerator", "device_count") if k in point}  # a test's run spans setups
            suite = str(c.get("name")).removesuffix(":between")
            key = (suite, hardware_label(machine), str(b.test), str(b.name), str(b.shape))
            if key in seen:
                continue
            seen.add(key)
            timed = b.candidate_us is not None and b.reference_us is not None and b.speedup is not None
            rows.append(
                (
                    key[0],
                    key[1],
                    _short_test(str(b.test)) + (f" ({b.test_outcome})" if b.test_outcome != "passed" else ""),
                    short_point(b.scope_point) if b.scope_point else "",
                    f"{b.name} {b.shape or ''}".strip(),
                    f"{b.candidate_us:.3g}" if timed and b.candidate_us is not None else "n/a",
                    f"{b.reference_us:.3g}" if timed and b.reference_us is not None else "n/a",
                    f"{b.speedup:.2f}x {_bounds(b.speedup_ci, '.2f')}" if timed and b.speedup is not None else "n/a",
                    f"{b.saved_us:.3g} {_bounds(b.saved_us_ci, '.3g')}" if b.saved_us is not None else "n/a",
                    f"{b.pairs} x {b.calls} ({b.timer})",
                )
            )
    return rows


MICRO_COLUMNS = (
    "suite",
    "setup",
    "test",
    "at",
    "op, shape",
    "candidate us/call",
    "reference us/call",
    "speed-up [bounds]",
    "us saved/call [bounds]",
    "pairs x calls",
)
MICRO_NOTE = (
    "Each test timed its candidate op against the reference op in interleaved pairs after warm-up; "
    "medians over the pairs, one-sided sign-test bounds (alpha 0.025 each side)."
)


def micro_table(evidence: Mapping[str, Any], outcomes: Outcomes) -> Table | None:
    """The kernel micro-benchmarks the tests timed (report.html's own section)."""
    rows = micro_rows(outcomes)
    if not rows:
        return None
    note = MICRO_NOTE + (f" {len(rows) - MAX_MICRO_ROWS} more not shown." if len(rows) > MAX_MICRO_ROWS else "")
    return Table(
        "kernel-micro-benchmarks", "Kernel micro-benchmarks", MICRO_COLUMNS, tuple(rows[:MAX_MICRO_ROWS]), note
    )


def micro_markdown(evidence: Mapping[str, Any], outcomes: Outcomes) -> list[MarkdownTable]:
    rows = micro_rows(outcomes)[:MAX_MICRO_ROWS]
    return [("Kernel micro-benchmarks", list(MICRO_COLUMNS), [list(r) for r in rows])] if rows else []


SECTION = ReportSection(html=kernel_matrix, table=micro_table, markdown=micro_markdown)
