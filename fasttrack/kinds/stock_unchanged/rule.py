"""The stock path unchanged: a pass is either nothing of the stock path changed
(``identical_stock_files``, no file listed) or a comparison of base and head that found no token
mismatch and logprobs within the tolerance it records (`beyond_tolerance`, the runner's own
test); a failure needs a mismatch or a difference beyond that tolerance. A switch's exactness
promise (``exact~<switch>``) must record tolerance 0: bit-identical, or failed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.evidence import ARM_SEPARATOR
from fasttrack.kinds.reading import Subject, status
from fasttrack.kinds.stock_unchanged.measurements import StockUnchangedMeasurements

EXACT = "exact"  # an exactness promise's instance: "exact~<switch>" (``exact.py``)


def beyond_tolerance(worst: float, atol: float) -> bool:
    """Stock at head computes something else: its logprobs differ from the base's beyond ``atol``."""
    return worst > atol


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    state = status(outcome)
    if state not in ("passed", "failed"):
        return []
    m = StockUnchangedMeasurements.of(outcome)
    if str(outcome.get("name", "")).startswith(EXACT + ARM_SEPARATOR) and (not m.exact or m.logprob_atol != 0):
        return [f"{state}, but it is an exactness promise and was not judged at tolerance 0"]
    if m.identical_stock_files is True:
        if state == "failed":
            return ["failed, but it records that no file of the stock path changed"]
        changed = m.stock_files_changed
        return [] if changed in (None, ()) else ["passed as unchanged, but it lists changed stock files"]
    worst, atol = m.max_logprob_diff, m.logprob_atol
    mismatch = m.first_mismatch
    if state == "passed":
        problems = []
        if not m.requests or not m.tokens:
            problems.append("passed, but it records no compared request or token")
        if mismatch:
            problems.append(f"passed, but it records a mismatch: {mismatch}")
        if worst is None or atol is None:
            problems.append("passed, but it records no logprob difference and tolerance")
        elif beyond_tolerance(worst, atol):
            problems.append(f"passed, but logprobs differ by {worst:g}, beyond its tolerance {atol:g}")
        return problems
    if not mismatch and (worst is None or atol is None or not beyond_tolerance(worst, atol)):
        return ["failed, but it records no token mismatch and logprobs within the tolerance"]
    return []
