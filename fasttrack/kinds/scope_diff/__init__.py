"""Code confinement: the changed files stay inside the model's code paths (``model``)."""

from fasttrack.kinds.base import Execution, KindSpec
from fasttrack.kinds.measurements import Measurements
from fasttrack.kinds.scope_diff import plan, rule

KIND = KindSpec(
    name="scope_diff",
    letter="C",
    section="model",
    execution=Execution("inprocess", drives_target=False, commands_needed=("git",)),
    runner="fasttrack.kinds.scope_diff.run",
    plan=plan.plan,
    check=rule.check,
    measurements=Measurements,
    aliases=("scope", "diff"),
)
