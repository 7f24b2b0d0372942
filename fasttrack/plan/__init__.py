"""The plan: manifest × machine → every check instance per scope point, runnable here or why not
(`planner`), each kind planning its own (``Kind.plan``); its text for `fasttrack plan` (`render`).

    plan = build_plan(manifest, detect_environment(), KINDS)
"""

from fasttrack.plan.instance import CheckInstance
from fasttrack.plan.planner import Plan, Planner, build_plan
from fasttrack.plan.render import format_seconds, hardware_label, render_plan_table

__all__ = ["CheckInstance", "Plan", "Planner", "build_plan", "format_seconds", "hardware_label", "render_plan_table"]
