"""The claims lint as evidence: one outcome per benchmark claim of the manifest.

What the lint says (`fasttrack.kinds.claims.lint.lint_claim`), recorded so that reports show it next to the
measurements: a claim whose baseline and candidate setups differ (8 GPUs before, 16 after) is
flagged **not comparable**; special conditions are labelled (``synthetic_acceptance``,
``prefill_excluded``, ``replay_workload``, ...); a claim with no stated setup, or with neither a
candidate value nor a speedup, is malformed.

Outcome, per claim (``id`` ``claims/<claim id>``, no scope point):
- malformed: **errored** (``error``), required: the manifest states something nobody can check;
- not comparable: **not_run** (``not_comparable``), not required: it cannot be reproduced as a
  speed-up of this optimisation, whatever is measured; the reason names the differing setup keys;
- otherwise: **passed**, not required: the lint found the setups comparable and the labels are in
  ``measurements.labels``. The lint measures nothing: whether the number is reproduced is the
  benchmarks check's outcome ``claims/<claim id>@<scope point>`` on hardware that can run it, and
  ``measurements.here`` says whether this machine could.

Claims never decide the verdict by themselves (the benchmarks' where-it-works rule does); a
reviewer reads the labels (the report's claims table, the summary's claims lines).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fasttrack.evidence import CheckOutcome, Status
from fasttrack.kinds.claims import lint as C
from fasttrack.kinds.claims.rule import lint_status

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.plan.instance import CheckInstance


def here_of(environment: Any) -> dict[str, Any]:
    """This machine as `fasttrack.kinds.claims.lint.hardware_mismatch` reads it."""
    if environment is None:
        return {"accelerator": "cpu", "device_count": 1}
    return {"accelerator": environment.accelerator, "device_count": max(1, int(environment.accelerator_count or 0))}


def lint_outcome(
    instance: CheckInstance, context: RunContext, benchmark: dict[str, Any], claim: dict[str, Any]
) -> CheckOutcome:
    manifest = getattr(context, "manifest", None)
    lint = C.lint_claim(benchmark, claim, C.switch_args(manifest.data) if manifest is not None else None)
    here = here_of(getattr(context, "environment", None))
    mismatch = C.hardware_mismatch(lint, here)
    state, required = lint_status(lint)  # the claims rule's own
    if state == "errored":
        status, code, verdict = Status.ERRORED, "error", "malformed"
        reason = f"claim {lint.claim_id!r} of benchmark {lint.benchmark_id!r} is malformed: " + "; ".join(lint.errors)
    elif state == "not_run":
        status, code, verdict = Status.NOT_RUN, "not_comparable", C.NOT_COMPARABLE
        why = ", ".join(lint.differences) if lint.differences else "the manifest marks it comparable: false"
        reason = (
            f"not comparable: baseline and candidate ran under different setups ({why}); "
            "the ratio mixes the optimisation with the setup change"
        )
    else:
        status, code, reason = Status.PASSED, None, None
        verdict = "labelled" if lint.labels else "comparable"
    measurements = {
        "claim_id": lint.claim_id,
        "benchmark_id": lint.benchmark_id,
        "statement": lint.statement,
        "claimed": dict(lint.claimed),
        "measured": None,  # the lint measures nothing; see the benchmarks check's claims outcomes
        "labels": list(lint.labels),
        "differences": list(lint.differences),
        "errors": list(lint.errors),
        "status": verdict,
        "assessment": lint.summary(),
        "lint": True,
        "here": f"not measurable here: {mismatch}"
        if mismatch
        else "this machine matches the claim's candidate hardware",
        "setups": {"baseline": lint.baseline_setup, "candidate": lint.candidate_setup},
        "synthetic_sources": [dict(s) for s in lint.synthetic_sources],
    }
    return context.outcome(
        instance, status, required=required, reason_code=code, reason=reason, measurements=measurements
    )


def run(instance: CheckInstance, context: RunContext) -> CheckOutcome:
    config = instance.config or {}
    benchmark, claim = config.get("benchmark"), config.get("claim")
    if not isinstance(benchmark, dict) or not isinstance(claim, dict):
        return context.outcome(
            instance,
            Status.ERRORED,
            reason_code="error",
            reason="the claims check needs its benchmark and claim in the plan's config; got neither",
        )
    return lint_outcome(instance, context, benchmark, claim)
