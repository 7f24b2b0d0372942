"""Sanitizer audits: a test under compute-sanitizer reports no hazard (``audits``)."""

from fasttrack.kinds.base import Execution, KindSpec
from fasttrack.kinds.sanitizer import plan, rule
from fasttrack.kinds.sanitizer.measurements import SanitizerMeasurements

KIND = KindSpec(
    name="sanitizer",
    letter="Z",
    section="audits",
    execution=Execution(
        "inprocess", drives_target=False, modules_needed=("pytest",), commands_needed=("compute-sanitizer",)
    ),
    runner="fasttrack.kinds.sanitizer.run",
    plan=plan.plan,
    check=rule.check,
    measurements=SanitizerMeasurements,
    exercises="kernel",
    aliases=("compute_sanitizer",),
    audit=True,
)
