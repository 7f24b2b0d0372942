"""The parrot runner: a subprocess through the run's process table, its output read back."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from fasttrack.evidence import CheckOutcome, Status
from support.parrot_kind.measurements import ParrotMeasurements
from support.parrot_kind.rule import echoed

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.plan import CheckInstance


def run(instance: CheckInstance, context: RunContext) -> CheckOutcome:
    said = str(instance.config["say"])
    done = context.run_process([sys.executable, "-c", f"print({said!r})"], log_name="parrot.log")
    measurements = {"said": said, "heard": done.tail().strip(), "returncode": done.returncode}
    if echoed(ParrotMeasurements.read(measurements)):
        return context.outcome(instance, Status.PASSED, measurements=measurements, artifacts=[done.log])
    return context.outcome(
        instance, Status.FAILED, reason_code="mismatch", reason="the process did not echo", measurements=measurements
    )
