"""Code confinement: the changed files stay inside the model's code paths (``model``)."""

from fasttrack.kinds.base import Execution, KindSpec
from fasttrack.kinds.scope_diff import plan, report, rule
from fasttrack.kinds.scope_diff.measurements import ScopeDiffMeasurements

KIND = KindSpec(
    name="scope_diff",
    letter="C",
    section="model",
    execution=Execution("inprocess", drives_target=False, commands_needed=("git",)),
    runner="fasttrack.kinds.scope_diff.run",
    plan=plan.plan,
    check=rule.check,
    measurements=ScopeDiffMeasurements,
    exercises="static",
    report=report.SECTION,
    aliases=("scope", "diff"),
)
