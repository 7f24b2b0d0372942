"""Preserved features: probes of full context, sampling, structured output ... (``features``)."""

from fasttrack.kinds.base import Execution, KindSpec
from fasttrack.kinds.features import plan, report, rule
from fasttrack.kinds.features.measurements import FeatureMeasurements

KIND = KindSpec(
    name="features",
    letter="F",
    section="features",
    execution=Execution("subprocess", drives_target=True, shares_cores=True),
    runner="fasttrack.kinds.features.run",
    plan=plan.plan,
    check=rule.check,
    measurements=FeatureMeasurements,
    exercises="end_to_end",
    report=report.SECTION,
    aliases=("feature",),
)
