"""The decision of a claim about kernel micro-benchmarks, from their recorded bounds: the
kernels runner's (`fasttrack.kinds.kernels.micro`) and the claims rule's, which re-derives it from
the evidence (no numpy, no scipy: `fasttrack verify` runs on a bare CI runner)."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any

REPRODUCED, NOT_REPRODUCED, NOT_MEASURABLE = "reproduced", "not_reproduced", "not_measurable"
DEFAULT_TOLERANCE = 0.05
UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3}


def matching(claim: Mapping[str, Any], benches: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The micro-benchmarks a claim is about: its name and shapes, timed by a passing test."""
    shapes = list(claim.get("shapes") or ())
    return [
        b
        for b in benches
        if b.get("test_outcome", "passed") == "passed"
        and b.get("speedup") is not None
        and fnmatch.fnmatchcase(str(b.get("name")), str(claim["benchmark"]))
        and (not shapes or any(fnmatch.fnmatchcase(str(b.get("shape")), s) for s in shapes))
    ]


def floors(claim: Mapping[str, Any]) -> dict[str, float]:
    """What each bound must clear: ``speedup_ci`` the claimed speed-up, ``saved_us_ci`` the claimed
    time saved per call in µs, each less the tolerance."""
    tol = float(claim.get("tolerance", DEFAULT_TOLERANCE))
    found = {}
    if claim.get("speedup") is not None:
        found["speedup_ci"] = float(claim["speedup"]) * (1 - tol)
    difference = claim.get("difference")
    if difference is not None:
        found["saved_us_ci"] = float(difference["value"]) * UNIT_S[str(difference["unit"])] * 1e6 * (1 - tol)
    return found


def verdict(bound: Any, floor: float) -> str | None:
    """Reproduced when the lower bound clears the floor, not reproduced when the upper is below it."""
    lo, hi = (list(bound or ()) + [None, None])[:2]
    if isinstance(lo, (int, float)) and lo >= floor:
        return REPRODUCED
    if isinstance(hi, (int, float)) and hi < floor:
        return NOT_REPRODUCED
    return None


def decide(claim: Mapping[str, Any], benches: Sequence[Mapping[str, Any]]) -> str | None:
    """reproduced | not_reproduced | not_measurable | None (undecided) over the claim's benchmarks."""
    found = matching(claim, benches)
    if not found:
        return NOT_MEASURABLE
    verdicts = [verdict(b.get(key), floor) for b in found for key, floor in floors(claim).items()]
    if NOT_REPRODUCED in verdicts:
        return NOT_REPRODUCED
    return REPRODUCED if verdicts and all(v == REPRODUCED for v in verdicts) else None
