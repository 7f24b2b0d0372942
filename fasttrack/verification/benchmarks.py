"""Benchmarks (``fasttrack.runners.benchmarks``): the speed-up is re-derived as the median of the
recorded per-pair ratios; a pass needs it at or above 1 - the slowdown tolerance (the runner's,
never a looser one recorded instead) and a CI that is not entirely below 1."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from fasttrack.verification._util import Subject, measurements, number, status

# fasttrack.runners.benchmarks.SLOWDOWN_TOLERANCE (that module needs numpy; a test keeps them equal)
SLOWDOWN_TOLERANCE = 0.02


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    state = status(outcome)
    if state not in ("passed", "failed"):
        return []
    m = measurements(outcome)
    ratio = number(m.get("ratio"))
    if ratio is None:
        if state == "failed" and outcome.get("reason_code") == "crashed":
            return []  # a request failed mid-benchmark: failed without a ratio, by the runner's rule
        return [f"{state}, but it records no speed-up ratio"]
    problems = []
    pairs = [number(r) for r in m.get("pair_ratios") or ()]
    if pairs and None not in pairs:
        median = statistics.median([p for p in pairs if p is not None])
        if abs(median - ratio) > 1e-9 * max(1.0, abs(ratio)):
            problems.append(f"its ratio {ratio:.6g} is not the median {median:.6g} of its per-pair ratios")
    ci = m.get("ratio_ci")
    ci = ci if isinstance(ci, list) and len(ci) == 2 else None
    high = number(ci[1]) if ci is not None else None
    tolerance = number(m.get("slowdown_tolerance"))
    if tolerance is not None and tolerance > SLOWDOWN_TOLERANCE:
        problems.append(f"it records a slowdown tolerance of {tolerance:g}; the rule's is {SLOWDOWN_TOLERANCE:g}")
    if state == "passed":
        if high is not None and high < 1.0:
            problems.append(f"passed, but its CI {ci} lies entirely below 1 (slower than stock)")
        if ratio < 1.0 - SLOWDOWN_TOLERANCE:
            problems.append(f"passed, but its speed-up {ratio:.3f}x is below 1 - {SLOWDOWN_TOLERANCE:g}")
    # A failure is not re-derived: besides a CI below 1, a speed-up short of what the manifest
    # expects fails too, by rules that record their own fields; a failure never helps a forger.
    return problems
