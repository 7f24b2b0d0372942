"""A check kind that exists only in the tests: it proves that a kind is one folder and one
registry line (CONTRIBUTING.md, "Adding a check kind"). At every hardware setup it runs a tiny
subprocess that prints the setup back, and passes when the process echoed it: it plans, runs,
records typed measurements, re-derives its status for `fasttrack verify`, and shows a section of
its own in the report, without a line of fasttrack/ naming it."""

from fasttrack.kinds.base import Execution, KindSpec
from support.parrot_kind import plan, report, rule
from support.parrot_kind.measurements import ParrotMeasurements

KIND = KindSpec(
    name="parrot",
    letter="X",
    section=None,  # it reads no manifest section of its own
    execution=Execution("inprocess", drives_target=False),
    runner="support.parrot_kind.run",
    plan=plan.plan,
    check=rule.check,
    measurements=ParrotMeasurements,
    exercises="static",  # it echoes the setup back: neither the target nor a kernel
    report=report.SECTION,
    aliases=("parrots",),
)
