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


def arm_summaries(
    checks: Iterable[CheckOutcome], manifest_data: Mapping[str, Any] | None, run_state: str = "complete"
) -> tuple[dict[str, Any], ...]:
    """What the evidence records of each arm (``verdict.arms``), where the run's verdict is
    computed: its name, verdict, required outcomes per status and its first reason not to pass
    (or that all passed). ``fasttrack verify`` re-derives it from the outcomes."""
    summaries = []
    for arm, verdict in arm_verdicts(checks, manifest_data, run_state).items():
        reasons = verdict.reasons
        why = next((r for r in reasons if not r.startswith("all ")), reasons[-1] if reasons else "")
        summaries.append({"arm": arm, "status": verdict.status.value, "counts": dict(verdict.counts), "reason": why})
    return tuple(summaries)


def counts_words(counts: Mapping[str, Any]) -> str:
    """``2 passed, 1 failed, 0 not run`` (and the errored, when any) of an arm's counts."""

    def n(key: str) -> int:
        value = counts.get(key, 0)
        return value if isinstance(value, int) else 0

    words = [f"{n('passed')} passed", f"{n('failed')} failed", f"{n('not_run')} not run"]
    return ", ".join(words + ([f"{n('errored')} errored"] if n("errored") else []))


def arm_lines(evidence: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """(arm, verdict, why) per declared arm of plain evidence, for the reports: as recorded in
    ``verdict.arms`` (derived from the outcomes for evidence written before it was); ``why`` is the
    arm's counts, then its first reason not to pass."""
    verdict = evidence.get("verdict") if isinstance(evidence.get("verdict"), Mapping) else {}
    recorded = verdict.get("arms") if isinstance(verdict, Mapping) else None
    if isinstance(recorded, list) and recorded:
        summaries: Iterable[Mapping[str, Any]] = [a for a in recorded if isinstance(a, Mapping)]
    else:
        manifest = evidence.get("manifest") if isinstance(evidence.get("manifest"), Mapping) else {}
        data = manifest.get("data") if isinstance(manifest, Mapping) else None
        if not rival_arms(data if isinstance(data, Mapping) else None):
            return ()
        checks = [CheckOutcome.from_dict(c) for c in evidence.get("checks") or () if isinstance(c, Mapping)]
        run = evidence.get("run") if isinstance(evidence.get("run"), Mapping) else {}
        state = str(run.get("state", "complete")) if isinstance(run, Mapping) else "complete"
        summaries = arm_summaries(checks, data if isinstance(data, Mapping) else None, state)
    lines = []
    for a in summaries:
        counts = a.get("counts")
        reason = str(a.get("reason") or "")
        why = counts_words(counts if isinstance(counts, Mapping) else {}) + (
            "" if reason.startswith("all ") or not reason else f"; {reason}"
        )
        lines.append((str(a.get("arm", "?")), str(a.get("status", "?")), why))
    return tuple(lines)
