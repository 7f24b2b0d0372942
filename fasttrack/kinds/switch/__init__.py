"""The switches and their proof of path: off by default, and each one's optimised path runs where
it acts (``switch`` / ``switches``)."""

from fasttrack.kinds.base import Execution, KindSpec
from fasttrack.kinds.switch import plan, rule
from fasttrack.kinds.switch.measurements import SwitchMeasurements

KIND = KindSpec(
    name="switch",
    letter="W",
    section="switches",
    execution=Execution("subprocess", drives_target=True, shares_cores=True),
    runner="fasttrack.kinds.switch.run",
    plan=plan.plan,
    check=rule.check,
    measurements=SwitchMeasurements,
    exercises="end_to_end",
    audit=True,
)
