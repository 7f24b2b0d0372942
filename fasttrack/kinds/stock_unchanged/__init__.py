"""The stock path unchanged: stock at head against stock at the base commit (``stock_unchanged``)."""

from fasttrack.kinds.base import Execution, KindSpec
from fasttrack.kinds.stock_unchanged import plan, rule
from fasttrack.kinds.stock_unchanged.measurements import StockUnchangedMeasurements

KIND = KindSpec(
    name="stock_unchanged",
    letter="U",
    section="stock_unchanged",
    execution=Execution("subprocess", drives_target=True, commands_needed=("git",), shares_cores=True, stock_only=True),
    runner="fasttrack.kinds.stock_unchanged.run",
    plan=plan.plan,
    check=rule.check,
    measurements=StockUnchangedMeasurements,
    exercises="end_to_end",
    aliases=("stock",),
)
