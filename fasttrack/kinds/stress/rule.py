"""Stress audits: a stress audit passes only when every audited test gave one result over all
repeats and no repeated run failed, with the repeats the manifest declares."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.reading import Subject, status
from fasttrack.kinds.stress.measurements import StressMeasurements


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    manifest = subject.manifest
    state = status(outcome)
    if state not in ("passed", "failed"):
        return []
    m = StressMeasurements.of(outcome)
    runs, failed_runs = m.runs, m.failed_runs
    if m.distinct_results is None or runs is None or failed_runs is None:
        return [f"{state}, but it records no repeated runs (measurements.distinct_results, runs, failed_runs)"]
    varied = m.varied
    problems = []
    if state == "passed":
        if varied:
            problems.append(f"passed, but {', '.join(varied)} gave more than one result over its repeats")
        if failed_runs:
            problems.append(f"passed, but {failed_runs} repeated run(s) failed")
        if not runs:
            problems.append("passed, but no repeated run is recorded")
        audit = next((a for a in manifest.audits if a.id == outcome.get("name")), None)
        if audit is not None and m.repeats != audit.repeats:
            problems.append(f"it records {m.repeats} repeats; the manifest declares {audit.repeats}")
    elif not varied and not failed_runs:
        problems.append("failed, but every audited test gave one result and no run failed")
    return problems
