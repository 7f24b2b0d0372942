"""Kernel tests: the manifest's pytest suites, parametrised over the scope (``kernel_tests``)."""

from fasttrack.kinds.base import Execution, KindSpec
from fasttrack.kinds.kernels import plan, report, rule
from fasttrack.kinds.kernels.measurements import KernelMeasurements

KIND = KindSpec(
    name="kernels",
    letter="K",
    section="kernel_tests",
    execution=Execution(
        "inprocess", drives_target=False, modules_needed=("pytest",), group_dims=("accelerator", "device_count")
    ),
    runner="fasttrack.kinds.kernels.run",
    plan=plan.plan,
    check=rule.check,
    measurements=KernelMeasurements,
    exercises="kernel",
    report=report.SECTION,
    aliases=("kernel",),
)
