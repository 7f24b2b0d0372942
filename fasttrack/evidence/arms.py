"""The verdict of each rival arm (``enable.arms`` of an option switch: mutually exclusive
candidates judged against one stock). Every arm's checks are named ``<check>~<arm>``; an arm's
verdict judges its own outcomes and the ones no arm owns (code confinement, kernel tests, the
stock path unchanged, claims), the same fail-closed rule as the whole run's. The run's verdict
covers every arm, so it is PASS only when each arm's is."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fasttrack.evidence.model import ARM_SEPARATOR, CheckOutcome, VerdictRecord, compute_verdict


def rival_arms(manifest_data: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The arms the manifest (as the evidence keeps it) declares, in its order."""
    data = manifest_data or {}
    switches = data.get("switches")
    sections: list[Any] = list(switches) if isinstance(switches, list) else [data.get("switch")]
    return tuple(
        str(arm)
        for section in sections
        if isinstance(section, Mapping)
        for arm in ((section.get("enable") or {}).get("arms") or ())
    )


def arm_of(outcome: CheckOutcome, arms: Iterable[str]) -> str | None:
    """The arm an outcome belongs to (its check name ends with ``~<arm>``), or None."""
    return next((arm for arm in arms if outcome.name.endswith(f"{ARM_SEPARATOR}{arm}")), None)


def arm_verdicts(
    checks: Iterable[CheckOutcome], manifest_data: Mapping[str, Any] | None, run_state: str = "complete"
) -> dict[str, VerdictRecord]:
    """Each declared arm's verdict (empty without arms)."""
    arms = rival_arms(manifest_data)
    checks = list(checks)
    return {
        arm: compute_verdict([c for c in checks if arm_of(c, arms) in (None, arm)], run_state=run_state) for arm in arms
    }
