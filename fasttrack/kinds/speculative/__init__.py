"""Speculative decoding: greedy outputs equal to plain decoding, acceptance at its minimum
(``scope.speculative``)."""

from fasttrack.kinds.base import Execution, KindSpec
from fasttrack.kinds.speculative import plan, rule
from fasttrack.kinds.speculative.measurements import SpeculativeMeasurements

KIND = KindSpec(
    name="speculative",
    letter="P",
    section="scope.speculative",
    execution=Execution("subprocess", drives_target=True, shares_cores=True),
    runner="fasttrack.kinds.speculative.run",
    plan=plan.plan,
    check=rule.check,
    measurements=SpeculativeMeasurements,
    exercises="end_to_end",
    audit=True,
)
