"""Negative scope: combinations the server must refuse to start with the switch on
(``switch.refused``, e.g. EPLB with the new MoE backend). Each is started as the candidate with
the combination added and passes only when the server exits non-zero before it serves, with the
declared message in its log; a server that serves it fails (``not_refused``)."""

from fasttrack.kinds.base import Execution, KindSpec
from fasttrack.kinds.refused import plan, report, rule
from fasttrack.kinds.refused.measurements import RefusedMeasurements

KIND = KindSpec(
    name="refused",
    letter="R",
    section="switches",
    # it starts a server of its own (never the run's shared ones), one at a time
    execution=Execution("inprocess", drives_target=True),
    runner="fasttrack.kinds.refused.run",
    plan=plan.plan,
    check=rule.check,
    measurements=RefusedMeasurements,
    report=report.SECTION,
    exercises="end_to_end",
    aliases=("negative_scope",),
)
