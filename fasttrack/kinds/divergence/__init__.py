"""Token divergence: next-token distributions of both sides by context position (``divergence``)."""

from fasttrack.kinds.base import Execution, KindSpec
from fasttrack.kinds.divergence import plan, rule
from fasttrack.kinds.divergence.measurements import DivergenceMeasurements

KIND = KindSpec(
    name="divergence",
    letter="D",
    section="divergence",
    execution=Execution("subprocess", drives_target=True, shares_cores=True),
    runner="fasttrack.kinds.divergence.run",
    plan=plan.plan,
    check=rule.check,
    measurements=DivergenceMeasurements,
    exercises="end_to_end",
    audit=True,
)
