"""The manifest's claims judged at the points a benchmark measured (``claims`` outcomes)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fasttrack.evidence import CheckOutcome, Status
from fasttrack.kinds.benchmarks.decide import Comparison
from fasttrack.kinds.claims import lint as C

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.plan.instance import CheckInstance


def claim_outcomes(
    instance: CheckInstance,
    context: RunContext,
    bench: Mapping[str, Any],
    point: Mapping[str, Any],
    comparison: Comparison,
    started: str,
) -> list[CheckOutcome]:
    """One ``claims`` outcome per claim of this benchmark whose conditions cover this point."""
    here = {"accelerator": point.get("accelerator"), "device_count": point.get("device_count", 1)}
    measured = [
        {
            "point": dict(point),
            "ratio": comparison.ratio,
            "ratio_ci": [b if math.isfinite(b) else None for b in comparison.ratio_ci] if comparison.ratio_ci else None,
            # each side's value (median over the pairs) for a difference claim
            "baseline": statistics.median(comparison.baseline) if comparison.baseline else None,
            "candidate": statistics.median(comparison.candidate) if comparison.candidate else None,
        }
    ]
    out = []
    own = C.switch_args(context.manifest.data)
    for claim in bench.get("claims") or ():
        lint = C.lint_claim(bench, claim, own)
        if not C.point_matches(lint.conditions, point, lint.candidate_setup):
            continue
        # Runs under the engine's forced acceptance measured a synthetic number: comparable with a
        # synthetic claim at the same acceptance length, and labelled so.
        forced = {s.get("acceptance_length") for s in lint.synthetic_sources}
        claimed_length = lint.conditions.get("acceptance_length")
        can_force = bool(forced) and (claimed_length is None or forced == {claimed_length})
        assessed = C.assess_claim(lint, here, measured, can_force_acceptance=can_force)
        status, code = {
            C.REPRODUCED: (Status.PASSED, None),
            C.NOT_REPRODUCED: (Status.FAILED, "regression"),
            C.NOT_COMPARABLE: (Status.NOT_RUN, "not_comparable"),
        }.get(assessed.status, (Status.NOT_RUN, "hardware" if assessed.reason.startswith("needs ") else "dependency"))
        out.append(
            context.outcome(
                instance,
                status,
                id=f"claims/{lint.claim_id}@{instance.scope_point.id if instance.scope_point is not None else 'global'}",
                kind="claims",
                name=lint.claim_id,
                required=False,
                started_at=started,
                reason_code=code,
                reason=None if status is Status.PASSED else assessed.reason,
                measurements={**assessed.measurements(), "point": dict(point), "assessment": assessed.reason},
            )
        )
    return out
