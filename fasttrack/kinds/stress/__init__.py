"""Stress audits: a test repeated with injected delays gives one result every time (``audits``)."""

from fasttrack.kinds.base import Execution, KindSpec
from fasttrack.kinds.stress import plan, rule
from fasttrack.kinds.stress.measurements import StressMeasurements

KIND = KindSpec(
    name="stress",
    letter="S",
    section="audits",
    execution=Execution("inprocess", drives_target=False, modules_needed=("pytest",)),
    runner="fasttrack.kinds.stress.run",
    plan=plan.plan,
    check=rule.check,
    measurements=StressMeasurements,
    exercises="kernel",  # a declared pytest test, repeated under injected delays: not the target as a whole
    aliases=("audit",),
    audit=True,
)
