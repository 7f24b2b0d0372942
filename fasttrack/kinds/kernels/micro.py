"""Kernel micro-benchmarks (`fasttrack.kernel_bench`, timed inside kernel tests) in a kernels
outcome, and the suite's claims about them judged at its scope point.

Summary of one micro-benchmark (`summarise`): the median time per call of the candidate and the
reference op over the timed pairs, the speed-up (median per-pair ratio reference ÷ candidate) and
the time saved per call (median per-pair difference reference - candidate), each with exact
one-sided (1 - alpha) sign-test bounds (`fasttrack.kinds.benchmarks.decide.paired_ratio`,
`fasttrack.kinds.benchmarks.speed.sign_bounds`: no assumption on the timing noise's shape).

A claim (``kernel_tests[].claims``) at a point it covers is judged on every micro-benchmark there
whose name and shape it names and whose test passed: **reproduced** (passed) when every one's lower
bound clears the claimed value less the tolerance, **not reproduced** (failed, ``regression``)
when one's upper bound lies below it, otherwise **not_run(underpowered)**; with no such
measurement **not_run(uncovered)**, never passed. Its outcome is a ``claims`` outcome
``claims/<id>@<point>``, not required (claims never decide the verdict by themselves).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fasttrack.evidence import CheckOutcome, Status
from fasttrack.kinds.benchmarks.decide import paired_ratio
from fasttrack.kinds.benchmarks.speed import sign_bounds
from fasttrack.kinds.kernels.judge import (
    DEFAULT_TOLERANCE,
    NOT_MEASURABLE,
    NOT_REPRODUCED,
    REPRODUCED,
    decide,
    floors,
    matching,
)
from fasttrack.manifest.sections import DEFAULT_SPEED_ALPHA, in_region

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.plan.instance import CheckInstance

MAX_MICRO = 200  # micro-benchmarks listed per outcome


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def summarise(
    result: Mapping[str, Any], timed: Mapping[str, Any], alpha: float = DEFAULT_SPEED_ALPHA
) -> dict[str, Any]:
    """One micro-benchmark of a test's result as the evidence records it (times in µs)."""
    cand = [float(t) for t in timed.get("candidate_s") or ()]
    ref = [float(t) for t in timed.get("reference_s") or ()]
    out: dict[str, Any] = {
        "test": result.get("nodeid"),
        "test_outcome": result.get("outcome"),
        "scope_point": result.get("scope_point"),
        "name": timed.get("name"),
        "shape": timed.get("shape"),
        "device": timed.get("device"),
        "timer": timed.get("timer"),
        "calls": timed.get("calls"),
        "pairs": min(len(cand), len(ref)),
        "alpha": alpha,
    }
    n = out["pairs"]
    if n == 0 or min(cand[:n]) <= 0:
        return {**out, "candidate_us": None, "reference_us": None, "speedup": None, "speedup_ci": None}
    comparison = paired_ratio(ref[:n], cand[:n], higher_is_better=False, alpha=alpha)  # ref ÷ cand
    saved = [(r - c) * 1e6 for r, c in zip(ref[:n], cand[:n])]
    lo, hi = sign_bounds(saved, alpha)
    return {
        **out,
        "candidate_us": statistics.median(cand[:n]) * 1e6,
        "reference_us": statistics.median(ref[:n]) * 1e6,
        "speedup": comparison.ratio,
        "speedup_ci": [_finite(b) for b in comparison.ratio_ci] if comparison.ratio_ci else None,
        "saved_us": statistics.median(saved),
        "saved_us_ci": [_finite(lo), _finite(hi)],
    }


def micro_benchmarks(results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every micro-benchmark the results recorded, summarised (the first `MAX_MICRO`)."""
    found = [summarise(r, t) for r in results for t in r.get("micro_benchmarks") or ()]
    return found[:MAX_MICRO]


def judge(claim: Mapping[str, Any], benches: Sequence[Mapping[str, Any]]) -> tuple[str | None, str, dict[str, Any]]:
    """(status: reproduced | not_reproduced | None (undecided) | not_measurable, why, measured)."""
    found = matching(claim, benches)
    if not found:
        return NOT_MEASURABLE, f"no passing test timed micro-benchmark {claim['benchmark']!r} here", {}
    lines = []
    for b in found:
        label = f"{b['name']} {b.get('shape') or ''}".strip()
        for key, floor in floors(claim).items():
            lo, hi = (list(b.get(key) or ()) + [None, None])[:2]
            if key == "speedup_ci":
                lines.append(f"{label}: {b['speedup']:.2f}x [{_show(lo)}, {_show(hi)}] vs floor {floor:.2f}x")
            else:
                lines.append(
                    f"{label}: {b['saved_us']:.3g} us saved per call [{_show(lo)}, {_show(hi)}] vs floor {floor:.3g} us"
                )
    measured = {
        "benchmarks": [
            {k: b.get(k) for k in ("name", "shape", "test_outcome", "speedup", "speedup_ci", "saved_us", "saved_us_ci")}
            for b in found
        ]
    }
    return decide(claim, found), "; ".join(lines), measured


def _show(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) else "-inf/inf"


def claim_outcomes(
    instance: CheckInstance, context: RunContext, suite: Any, benches: Sequence[Mapping[str, Any]]
) -> list[CheckOutcome]:
    """One ``claims`` outcome per claim of the suite whose ``points`` contain this instance's point."""
    point = instance.scope_point.as_dict() if instance.scope_point is not None else {}
    out = []
    for claim in suite.raw.get("claims") or ():
        if not in_region(point, claim.get("points") or {}):
            continue
        status, why, measured = judge(claim, benches)
        state, code, word = {
            REPRODUCED: (Status.PASSED, None, REPRODUCED),
            NOT_REPRODUCED: (Status.FAILED, "regression", NOT_REPRODUCED),
            NOT_MEASURABLE: (Status.NOT_RUN, "uncovered", NOT_MEASURABLE),
        }.get(status or "", (Status.NOT_RUN, "underpowered", "undecided"))
        claimed = {k: claim.get(k) for k in ("speedup", "difference", "shapes") if claim.get(k) is not None}
        out.append(
            context.outcome(
                instance,
                state,
                id=f"claims/{claim['id']}@{instance.scope_point.id if instance.scope_point is not None else 'global'}",
                kind="claims",
                name=str(claim["id"]),
                required=False,
                reason_code=code,
                reason=None if state is Status.PASSED else why,
                measurements={
                    "claim_id": claim["id"],
                    "benchmark_id": f"kernel_tests/{suite.id}:{claim['benchmark']}",
                    "statement": claim.get("statement"),
                    "claimed": {**claimed, "tolerance": float(claim.get("tolerance", DEFAULT_TOLERANCE))},
                    "measured": measured or None,
                    "labels": ["micro_benchmark"],
                    "status": word,
                    "assessment": why,
                    "point": point,
                },
            )
        )
    return out
