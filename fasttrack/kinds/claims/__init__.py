"""Benchmark claims: the claims lint (comparable setups, labels for special conditions) of each
claim of a benchmark (``benchmarks[].claims``)."""

from fasttrack.kinds.base import Execution, KindSpec
from fasttrack.kinds.claims import plan, report, rule
from fasttrack.kinds.claims.measurements import ClaimMeasurements

KIND = KindSpec(
    name="claims",
    letter="L",
    section="benchmarks",
    execution=Execution("inprocess", drives_target=False),
    runner="fasttrack.kinds.claims.run",
    plan=plan.plan,
    check=rule.check,
    measurements=ClaimMeasurements,
    exercises="static",
    report=report.SECTION,
    aliases=("claim",),
    sets_own_required=True,
)
