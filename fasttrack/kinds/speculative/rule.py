"""Speculative decoding: a pass needs greedy outputs equal to non-speculative decoding, drafts
proposed, the acceptance length at or above the declared minimum (`below_minimum`, the
runner's own bound) and within the declared margin of stock's (`stock.below_stock`); a fail
needs a mismatch or an acceptance length below one of them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.reading import Subject, status
from fasttrack.kinds.speculative.measurements import SpeculativeMeasurements

DEFAULT_MARGIN = 0.10  # scope.speculative.acceptance_margin when the manifest gives none


def below_stock(length: float | None, stock: float | None, margin: float) -> bool:
    """The non-inferiority bound against stock: the candidate's acceptance length below
    ``(1 - margin)`` x stock's on the same prompts (or none measured where stock has one) fails."""
    return stock is not None and (length is None or length < (1.0 - margin) * stock)


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
    declared_margin = getattr(spec, "acceptance_margin", None) if spec is not None else None
    margin = float(declared_margin if declared_margin is not None else DEFAULT_MARGIN)
    length = m.acceptance_length
    low = below_minimum(length, minimum)
    behind = below_stock(length, m.stock_acceptance_length, margin)
    if state == "passed":
        if m.greedy_equal is not True:
            problems.append("passed, but greedy output differs from non-speculative decoding")
        if not m.drafts:
            problems.append("passed, but no draft was proposed")
        if low:
            problems.append(f"passed, but the acceptance length {length} is below the minimum {minimum:g}")
        if m.stock_acceptance_length is None:
            problems.append("passed, but it records no acceptance length of stock on the same prompts")
        elif behind:
            problems.append(
                f"passed, but the acceptance length {length} is more than {margin:.0%} below stock's {m.stock_acceptance_length}"
            )
    elif m.greedy_equal is not False and not low and not behind:
        problems.append(
            "failed, but outputs are equal and the acceptance length is neither below the minimum nor behind stock's"
        )
    return problems
