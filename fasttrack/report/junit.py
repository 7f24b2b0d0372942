"""JUnit XML: one testcase per check outcome (classname = check kind, name = check id)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fasttrack.fileio import atomic_write

# XML 1.0 forbids most control characters; reasons can carry them from tool output.
_BAD_XML = {c: None for c in range(32) if c not in (9, 10, 13)}


def _text(value: Any) -> str:
    return ("" if value is None else str(value)).translate(_BAD_XML)


def render_junit(evidence: Mapping[str, Any]) -> bytes:
    checks = list(evidence.get("checks", ()))
    root = ET.Element("testsuites", name=f"fasttrack {_text(evidence['manifest']['optimisation_id'])}")
    suites: dict[str, ET.Element] = {}
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
    for c in checks:
        kind = c["kind"]
        suite = suites.get(kind)
        if suite is None:
            suite = suites[kind] = ET.SubElement(root, "testsuite", name=kind)
            suite.attrib.update(tests="0", failures="0", errors="0", skipped="0", time="0")
        case = ET.SubElement(
            suite, "testcase", classname=kind, name=_text(c["id"]), time=f"{float(c.get('duration_s') or 0):.3f}"
        )
        reason = _text(c.get("reason") or "no reason recorded")
        code = _text(c.get("reason_code") or c["status"])
        optional = "" if c.get("required", True) else " (optional: does not decide the verdict)"
        counter = None
        if c["status"] == "failed":
            ET.SubElement(case, "failure", message=reason + optional, type=code).text = reason
            counter = "failures"
        elif c["status"] == "errored":
            ET.SubElement(case, "error", message=reason + optional, type=code).text = reason
            counter = "errors"
        elif c["status"] == "not_run":
            ET.SubElement(case, "skipped", message=f"({code}) {reason}{optional}")
            counter = "skipped"
        if c.get("scope_point_id"):
            props = ET.SubElement(case, "properties")
            ET.SubElement(props, "property", name="scope_point", value=_text(c["scope_point_id"]))
        for key in ("tests", counter):
            if key:
                suite.set(key, str(int(suite.get(key) or 0) + 1))
                totals[key] += 1
        suite.set("time", f"{float(suite.get('time') or 0) + float(c.get('duration_s') or 0):.3f}")
        totals["time"] += float(c.get("duration_s") or 0)
    root.attrib.update({k: (f"{v:.3f}" if k == "time" else str(v)) for k, v in totals.items()})
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def write_junit(evidence: Mapping[str, Any], path: Path) -> Path:
    atomic_write(Path(path), render_junit(evidence))
    return Path(path)
