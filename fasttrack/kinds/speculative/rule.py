"""Speculative decoding: a pass needs greedy outputs equal to non-speculative decoding, drafts
proposed, and the acceptance length at or above the declared minimum (`below_minimum`, the
runner's own bound); a fail needs a mismatch or an acceptance length below it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.reading import Subject, status
from fasttrack.kinds.speculative.measurements import SpeculativeMeasurements


def below_minimum(length: float | None, minimum: float | None) -> bool:
    """The pass rule's acceptance bound: an acceptance length below the declared minimum (or none
    measured where there is one) fails."""
    return minimum is not None and (length is None or length < minimum)


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    state = status(outcome)
    if state not in ("passed", "failed"):
        return []
    m = SpeculativeMeasurements.of(outcome)
    if "greedy_equal" not in m.raw:
        return [f"{state}, but it records no comparison with non-speculative decoding"]
    minimum = m.min_acceptance_length
    spec = subject.manifest.scope.speculative
    declared = getattr(spec, "min_acceptance_length", None) if spec is not None else None
    problems = []
    if declared is not None and minimum != float(declared):
        problems.append(f"it judged acceptance against {minimum}; the manifest declares {declared}")
        minimum = float(declared)
    length = m.acceptance_length
    low = below_minimum(length, minimum)
    if state == "passed":
        if m.greedy_equal is not True:
            problems.append("passed, but greedy output differs from non-speculative decoding")
        if not m.drafts:
            problems.append("passed, but no draft was proposed")
        if low:
            problems.append(f"passed, but the acceptance length {length} is below the minimum {minimum:g}")
    elif m.greedy_equal is not False and not low:
        problems.append("failed, but outputs are equal and the acceptance length is not below the minimum")
    return problems
