"""Caps applied when the plan is made, so that no run writes evidence its own readers refuse
(`verify`, `report` and `--resume` read at most ``EVIDENCE_MAX_BYTES``): a manifest declares at
most ``MAX_SCOPE_POINTS`` scope points (checked by `validate` before any point is built), a plan
has at most ``MAX_INSTANCES`` check instances, and the evidence they would make, estimated at
``OUTCOME_BYTES`` per outcome and ``POINT_BYTES`` per scope point, stays under half the evidence
cap (the rest is headroom for measurements). Real manifests are far below: the largest example
declares 1,008 points and plans 430 instances."""

from __future__ import annotations

from fasttrack.fileio import EVIDENCE_MAX_BYTES

MAX_SCOPE_POINTS = 20_000
MAX_INSTANCES = 20_000
OUTCOME_BYTES = 1_500  # an outcome with its scope point, reason and small measurements (measured: 0.6-1.2 kB)
POINT_BYTES = 300  # one entry of evidence.scope_points
EXPECTED_MAX_BYTES = EVIDENCE_MAX_BYTES // 2


def scope_problem(points: int) -> str | None:
    if points <= MAX_SCOPE_POINTS:
        return None
    return (
        f"the scope declares {points:,} scope points (the product of its dimensions' values), more than the "
        f"{MAX_SCOPE_POINTS:,} fasttrack plans: its evidence would be larger than its own readers accept; "
        "narrow the dimensions (fewer batch points or engine values)"
    )


def plan_problem(points: int, instances: int, manifest_bytes: int) -> str | None:
    expected = points * POINT_BYTES + instances * OUTCOME_BYTES + 2 * manifest_bytes
    if instances <= MAX_INSTANCES and expected <= EXPECTED_MAX_BYTES:
        return None
    return (
        f"the plan has {instances:,} check instances over {points:,} scope points (at most {MAX_INSTANCES:,} "
        f"instances), and its evidence would take about {_mib(expected)} (at most "
        f"{_mib(EXPECTED_MAX_BYTES)}, half the {_mib(EVIDENCE_MAX_BYTES)} that verify, report "
        "and --resume read): narrow the scope or the checks"
    )


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):,.0f} MiB" if n >= 1024 * 1024 else f"{n / 1024:,.0f} KiB"
