"""Preserved features in the report: one row per probe and scope point with its statistic, p-value
and details, and one line per accelerator and reason for the probes that did not run here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.features.measurements import FeatureMeasurements
from fasttrack.report.format import details_list, elsewhere_lines, human, num, ran_here, short_point, why
from fasttrack.report.sections import Outcomes, ReportSection


def feature_row(c: Mapping[str, Any]) -> dict[str, Any]:
    m = FeatureMeasurements.of(c)
    return {
        "probe": str(m.probe or c["name"]),
        "point": short_point(c.get("scope_point")),
        "status": c["status"],
        "statistic": human(m.statistic) if m.statistic is not None else "",
        "p_value": num(m.p_value),
        "reason": why(c) if c["status"] != "passed" else str(c.get("reason") or ""),
        "details": details_list(m.details),
    }


def features(evidence: Mapping[str, Any], outcomes: Outcomes) -> Mapping[str, Any]:
    ran, elsewhere = ran_here(outcomes)
    return {"rows": [feature_row(c) for c in ran], "elsewhere": elsewhere_lines(elsewhere)}


SECTION = ReportSection(html=features)
