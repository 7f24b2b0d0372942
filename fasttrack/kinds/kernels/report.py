"""Kernel tests in the report: per suite and hardware setup, one row per scope point with its
worst error ÷ tolerance over every test there and a cell per test; problem rows first; the batch
sizes the between-points instances ran; outcomes that did not run here, one line each."""

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
from fasttrack.report.sections import Outcomes, ReportSection

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


SECTION = ReportSection(html=kernel_matrix)
