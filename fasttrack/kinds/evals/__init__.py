"""Model evaluations: paired non-inferiority of the candidate against stock (``evals``)."""

from fasttrack.kinds.base import Execution, KindSpec
from fasttrack.kinds.evals import plan, report, rule
from fasttrack.kinds.evals.measurements import EvalMeasurements

KIND = KindSpec(
    name="evals",
    letter="E",
    section="evals",
    execution=Execution("subprocess", drives_target=True, modules_needed=("lm_eval",), shares_cores=True),
    runner="fasttrack.kinds.evals.run",
    plan=plan.plan,
    check=rule.check,
    measurements=EvalMeasurements,
    exercises="end_to_end",
    report=report.SECTION,
    aliases=("eval",),
)
