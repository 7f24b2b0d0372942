"""The stress audit: it runs a declared test N times with random delays injected through an
environment variable the target honours, and requires identical results every time (a race that
a delay can expose shows up as a differing result digest)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fasttrack.evidence import Status
from fasttrack.kinds.pytest_session import audited, run_pytest
from fasttrack.process.groups import signal_name

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.plan.instance import CheckInstance


def _where(point: Any) -> dict[str, Any]:
    if point is None:
        return {}
    return {k: point.get(k) for k in ("accelerator", "device_count", "tensor_parallel") if point.get(k) is not None}


def run(instance: CheckInstance, context: RunContext) -> Any:
    audit, missing = audited(instance, context)
    if missing is not None:
        return missing
    extra = ["--fasttrack-repeat", str(max(1, audit.repeats))]
    if audit.delay_env:
        delays = list(audit.delays_us) or [0, 10, 100, 1000]
        extra += ["--fasttrack-delay-env", audit.delay_env, "--fasttrack-delays", ",".join(str(d) for d in delays)]
    session = run_pytest(
        context, [audit.test], tag=f"stress-{audit.id}", where=_where(instance.scope_point), extra=extra
    )
    return judge(instance, context, audit, session)


def judge(instance: CheckInstance, context: RunContext, audit: Any, session: Any) -> Any:
    by_test: dict[str, list[dict[str, Any]]] = {}
    for r in session.results:
        by_test.setdefault(r["test"], []).append(r)
    failing = [r for r in session.results if r["outcome"] in ("failed", "error")]
    distinct: dict[str, int] = {}
    first_mismatch = None
    mismatched = []
    for test, runs in by_test.items():
        runs.sort(key=lambda r: r.get("repeat") or 0)
        digests = ["|".join(r.get("result_digests") or []) for r in runs if r["outcome"] == "passed"]
        recorded = [d for d in digests if d]
        distinct[test] = len(set(recorded))
        if len(set(recorded)) > 1:
            index = next(i for i, d in enumerate(recorded) if d != recorded[0])
            first_mismatch = index if first_mismatch is None else min(first_mismatch, index)
            mismatched.append(
                f"{test} gave {len(set(recorded))} distinct results over {len(recorded)} repeats "
                f"(first differing at repeat {index})"
            )
    measurements = {
        "repeats": audit.repeats,
        "delay_env": audit.delay_env,
        "delays_us": list(audit.delays_us),
        "tests": len(by_test),
        "runs": len(session.results),
        "distinct_results": distinct,
        "first_mismatch": first_mismatch,
        "digests_recorded": any(distinct.values()),
        "failed_runs": len(failing),
        "tool": "repeat+delay",
    }
    common = {"measurements": measurements, "artifacts": session.artifacts}
    if mismatched:
        return context.outcome(
            instance, Status.FAILED, reason_code="mismatch", reason="; ".join(mismatched[:3]), **common
        )
    if failing:
        r = failing[0]
        return context.outcome(
            instance,
            Status.FAILED,
            reason_code="test_failed",
            **common,
            reason=f"{len(failing)} of {len(session.results)} repeated runs failed; first: {r['nodeid']}: {r.get('message') or r['outcome']}",
        )
    if session.died:
        culprit = f" while running {session.running}" if session.running else ""
        code, what = (
            ("timeout", f"ran past its timeout of {session.timeout_s:g}s{culprit}; killed")
            if session.timed_out
            else ("crashed", f"pytest died from {signal_name(session.signal or 0)}{culprit}")
        )
        return context.outcome(instance, Status.ERRORED, reason_code=code, reason=f"the stress audit {what}", **common)
    passed = [r for r in session.results if r["outcome"] == "passed"]
    if session.returncode not in (0, 1) or not passed:
        return context.outcome(
            instance,
            Status.ERRORED,
            reason_code="error",
            **common,
            reason=f"the audited test {audit.test} did not run (pytest exit {session.returncode}){session.last_words()}",
        )
    return context.outcome(instance, Status.PASSED, **common)
