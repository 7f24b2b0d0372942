"""The exactness promise (``exact: true`` on a switch): with that switch alone on, the candidate
must be bit-identical to stock at head, on the stock-unchanged check's greedy requests: the same
greedy tokens, and logprobs (of the generated tokens and of every top-k entry, with the same
top-k tokens) equal to the last bit. The first difference is named. One instance per switch that
promises it, ``stock_unchanged/exact~<switch>@<point>``, at every deployment where the switch has
an effect and at every declared dtype (a format can be exact in one dtype and not another)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from fasttrack.errors import TargetError
from fasttrack.evidence import CheckOutcome, Status
from fasttrack.kinds.stock_unchanged.rule import EXACT

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.plan.instance import CheckInstance

__all__ = ["EXACT", "run_exact"]


def run_exact(
    instance: CheckInstance, context: RunContext, job: dict[str, Any], measurements: dict[str, Any]
) -> CheckOutcome:
    from fasttrack.kinds.stock_unchanged.run import StockRun, answer, compare_runs
    from fasttrack.probes.sides import as_probe_target
    from fasttrack.targets.sides import TargetDependencyMissing, opened_pair

    m = context.manifest  # the arm's manifest: the candidate turns on only the promising switch
    point = job["point"]
    measurements = {**measurements, "exact": True, "switches_on": list(m.candidate_switches or ())}
    answers: dict[str, StockRun] = {}
    try:
        with opened_pair(m, point, log_dir=context.artifact_dir) as (baseline, candidate):
            for name, side in (("stock", baseline), ("candidate", candidate)):
                started = time.monotonic()
                target = as_probe_target(m, side)
                got = answer(target, job["prompts"], job["batches"], job["max_tokens"], job["top_logprobs"])
                answers[name] = StockRun(got, time.monotonic() - started)
    except TargetDependencyMissing as err:
        return context.outcome(
            instance, Status.NOT_RUN, reason_code="dependency", reason=str(err), measurements=measurements
        )
    except TargetError as err:
        return context.outcome(
            instance, Status.ERRORED, reason_code="target", reason=str(err), measurements=measurements
        )
    result = compare_runs(answers["stock"], answers["candidate"], 0.0, sides=("stock", "candidate"))
    measurements.update(result.measurements)
    reason = result.reason
    if reason is not None:
        reason = f"promised bit-identical to stock (exact: true), but {reason}"
    return context.outcome(
        instance,
        result.status,
        reason_code=None if result.status is Status.PASSED else "mismatch",
        reason=reason,
        measurements=measurements,
    )
