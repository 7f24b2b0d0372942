"""``sanitizer`` audits (compute-sanitizer): one per GPU hardware setup; a scope without a GPU
has one global instance, not run (out of scope)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fasttrack.manifest.sections import thaw
from fasttrack.plan.blockers import Blocker

if TYPE_CHECKING:
    from fasttrack.plan import CheckInstance, Planner


def plan(planner: Planner) -> Iterable[CheckInstance]:
    m = planner.m
    gpu_setups = [p for p in planner.hardware if not planner.is_cpu(p)]
    for audit in m.audits:
        if audit.kind == "stress":
            continue
        if not gpu_setups:
            blocker = Blocker(
                "out_of_scope",
                "compute-sanitizer needs an NVIDIA GPU and the scope declares none",
                "a GPU in the scope",
            )
            timeout = m.timeout_for("sanitizer", audit.timeout_s)
            yield planner.instance("sanitizer", audit.id, None, audit.required, blocker, 0.0, timeout, thaw(audit.raw))
            continue
        for point in gpu_setups:
            yield planner.make(
                "sanitizer", audit.id, point, audit.required, 300.0, thaw(audit.raw), timeout=audit.timeout_s
            )
