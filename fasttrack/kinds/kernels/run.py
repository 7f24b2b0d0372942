"""Kernel tests: run a manifest's kernel-test suite with pytest in a subprocess (the fasttrack
plugin parametrises it over the scope points) and turn its results into one outcome per scope
point. A point passes only when, for every dimension the suite covers, a passing kernel test
exercised it there and no test failed there; otherwise it is failed, errored (crash, timeout) or
not_run(uncovered) naming the dimensions nobody tested."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fasttrack.evidence import Status
from fasttrack.kinds.context import join_limited
from fasttrack.kinds.kernels.plan import BETWEEN_SUFFIX
from fasttrack.kinds.kernels.rule import MAX_LISTED
from fasttrack.kinds.pytest_session import MISSING_MODULE, PytestSession, run_pytest
from fasttrack.process.groups import signal_name

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.manifest import Manifest
    from fasttrack.plan.instance import CheckInstance

FAILING = ("failed", "error")


def _suite(manifest: Manifest, name: str) -> Any:
    name = name.removesuffix(BETWEEN_SUFFIX)
    for suite in manifest.kernel_tests:
        if suite.id == name:
            return suite
    raise LookupError(f"kernel_tests has no suite {name!r}")


def run(instance: CheckInstance, context: RunContext) -> Any:
    suite = _suite(context.manifest, instance.name)
    point = instance.scope_point
    where = {k: point.get(k) for k in ("accelerator", "device_count") if point is not None and point.get(k) is not None}
    missing = [p for p in suite.paths if not (context.repo_root / p.split("::", 1)[0]).exists()]
    if missing:
        return context.outcome(
            instance,
            Status.ERRORED,
            reason_code="error",
            reason=f"kernel test path(s) {', '.join(missing)} (kernel_tests {suite.id}) do not exist",
        )
    key = f"kernels:{suite.id}:{sorted(where.items())}"
    session = context.shared.get(key)
    if session is None:
        seed = ["--fasttrack-offgrid-seed", context.head] if context.head else []
        session = run_pytest(
            context,
            list(suite.paths),
            tag=f"pytest-{suite.id}",
            where=where,
            extra=[*seed, *suite.args],
            env=dict(suite.env),
        )
        context.shared[key] = session
    if instance.name.endswith(BETWEEN_SUFFIX):
        return between_outcome(instance, context, session)
    outcome = outcome_at(instance, context, session, tuple(suite.covers), tuple(suite.required_tests))
    if not suite.raw.get("claims"):
        return outcome
    from fasttrack.kinds.kernels.micro import claim_outcomes  # numpy and scipy: only for claims

    return [outcome, *claim_outcomes(instance, context, suite, outcome.measurements.get("micro_benchmarks") or ())]


def between_outcome(instance: CheckInstance, context: RunContext, session: PytestSession) -> Any:
    """The batch sizes between the declared points: passed when every one ran and passed."""
    from fasttrack.pytest_plugin import between_batches

    batch = context.manifest.scope.batch
    assert batch is not None  # the planner makes this instance only for a scope with batch
    wanted, policy = between_batches(batch.min, batch.max, batch.representative(), context.head or "0")
    results = [r for r in session.results if r.get("off_grid") and matches(instance.scope_point, r["scope_point"])]
    ran = sorted({int(r["scope_point"]["batch"]) for r in results if r["outcome"] == "passed"})
    failing = [r for r in results if r["outcome"] in FAILING]
    bad = sorted({int(r["scope_point"]["batch"]) for r in failing})
    measurements = {
        **_measurements(failing or results),
        "batch_sizes": {
            "declared": list(batch.representative()),
            "between": wanted,
            "policy": policy,
            "seed": context.head if policy != "every size" else None,
            "ran": ran,
            "failed": bad,
        },
    }
    common = {"measurements": measurements, "artifacts": session.artifacts}
    if failing:
        shown = "; ".join(f"{r['nodeid']}: {r.get('message') or r['outcome']}" for r in failing[:3])
        return context.outcome(
            instance,
            Status.FAILED,
            reason_code="test_failed",
            reason=f"kernel tests fail at batch size(s) {describe_points([str(b) for b in bad])} between the declared "
            f"points ({len(failing)} test(s)): {shown}",
            **common,
        )
    if session.died or session.returncode not in (0, 1, 5) or session.collected is None:
        return outcome_at(instance, context, session, ())  # the session's own error, said once
    missing = [b for b in wanted if b not in set(ran)]
    if missing:
        return context.outcome(
            instance,
            Status.NOT_RUN,
            reason_code="uncovered",
            reason=f"no passing kernel test ran at batch size(s) {describe_points([str(b) for b in missing])} between "
            "the declared points (a test covering batch runs them when the fasttrack plugin has the manifest)",
            **common,
        )
    return context.outcome(instance, Status.PASSED, **common)


def matches(point: Any, result_point: dict[str, Any]) -> bool:
    """A test ran 'at' a scope point when they agree on every dimension both have."""
    dims = dict(point.dims) if point is not None else {}
    return all(dims[k] == v for k, v in result_point.items() if k in dims)


def outcome_at(
    instance: CheckInstance,
    context: RunContext,
    session: PytestSession,
    covers: Sequence[str],
    required_tests: Sequence[str] = (),
) -> Any:
    point = instance.scope_point
    marked = [r for r in session.results if r.get("scope_point") is not None and matches(point, r["scope_point"])]
    unmarked = [r for r in session.results if r.get("scope_point") is None]
    relevant = marked + unmarked
    failing = [r for r in relevant if r["outcome"] in FAILING]
    required = required_passes(relevant, required_tests)
    measurements = {**_measurements(relevant), **({"required_tests": required} if required_tests else {})}
    common = {"measurements": measurements, "artifacts": session.artifacts}
    if failing:
        shown = "; ".join(f"{r['nodeid']}: {r.get('message') or r['outcome']}" for r in failing[:3])
        more = f" (and {len(failing) - 3} more)" if len(failing) > 3 else ""
        return context.outcome(
            instance,
            Status.FAILED,
            reason_code="test_failed",
            reason=f"{len(failing)} kernel test(s) failed here: {shown}{more}",
            **common,
        )
    if session.died:
        return _died(instance, context, session, common)
    if session.returncode not in (0, 1, 5):
        missing = MISSING_MODULE.search(session.log_tail)
        if missing:
            return context.outcome(
                instance,
                Status.NOT_RUN,
                reason_code="dependency",
                **common,
                reason=f"the kernel tests need the Python module {missing.group(1)!r}, which is not installed here",
            )
        return context.outcome(
            instance,
            Status.ERRORED,
            reason_code="error",
            **common,
            reason=f"pytest exited with code {session.returncode}{session.last_words()}",
        )
    if session.collected is None:
        return context.outcome(
            instance,
            Status.ERRORED,
            reason_code="error",
            **common,
            reason="the fasttrack pytest plugin did not run in the kernel-test session "
            "(disabled with -p no:fasttrack?), so no scope point can be credited",
        )
    passing = [r for r in marked if r["outcome"] == "passed"]
    if covers:
        uncovered = [d for d in covers if not any(d in (r.get("dims") or ()) for r in passing)]
    else:
        uncovered = [] if any(r["outcome"] == "passed" for r in relevant) else ["any test"]
    absent = [r["pattern"] for r in required if not r["passed"]]
    if absent and not uncovered:
        return _required_absent(instance, context, absent, common)
    if uncovered:
        where = point.id if point is not None else "this suite"
        if session.collected == 0:
            why = "pytest collected no kernel tests"
        else:
            why = f"no passing kernel test exercised {', '.join(uncovered)}"
        return context.outcome(instance, Status.NOT_RUN, reason_code="uncovered", reason=f"{why} at {where}", **common)
    return context.outcome(instance, Status.PASSED, **common)


def _died(instance: CheckInstance, context: RunContext, session: PytestSession, common: dict[str, Any]) -> Any:
    culprit = f" while running {session.running}" if session.running else ""
    if session.timed_out:
        return context.outcome(
            instance,
            Status.ERRORED,
            reason_code="timeout",
            **common,
            reason=f"the kernel tests ran past their timeout of {session.timeout_s:g}s{culprit}; killed",
        )
    return context.outcome(
        instance,
        Status.ERRORED,
        reason_code="crashed",
        **common,
        reason=f"pytest died from {signal_name(session.signal or 0)}{culprit}",
    )


def _required_absent(
    instance: CheckInstance, context: RunContext, absent: Sequence[str], common: dict[str, Any]
) -> Any:
    where = instance.scope_point.id if instance.scope_point is not None else "this suite"
    return context.outcome(
        instance,
        Status.NOT_RUN,
        reason_code="uncovered",
        reason=f"required kernel test(s) {join_limited(absent)} did not pass at {where} "
        f"(skipped, deselected or not collected)",
        **common,
    )


def required_passes(results: Sequence[dict[str, Any]], patterns: Sequence[str]) -> list[dict[str, Any]]:
    """Per required pattern (fnmatch over node ids): how many tests it matched here and how many
    of them passed; a pattern that matched nothing passing keeps the outcome from passing."""
    out = []
    for pattern in patterns:
        hits = [r for r in results if fnmatch.fnmatchcase(str(r["nodeid"]), pattern)]
        out.append(
            {
                "pattern": pattern,
                "matched": len(hits),
                "passed": sum(1 for r in hits if r["outcome"] == "passed"),
                "skipped": sum(1 for r in hits if r["outcome"] not in ("passed", *FAILING)),
            }
        )
    return out


def _measurements(results: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    for r in results:
        key = {"passed": "passed", "failed": "failed", "error": "errors"}.get(r["outcome"], "skipped")
        counts[key] += 1
    tests = [
        {
            "nodeid": r["nodeid"],
            "outcome": r["outcome"],
            "duration_s": r.get("duration_s", 0.0),
            "scope_point": r.get("scope_point"),
            "tolerance": r.get("tolerance"),
            "worst_error": r.get("worst_error"),
            "message": r.get("message", ""),
        }
        for r in results[:MAX_LISTED]
    ]
    found = {"tests": tests, "tests_shown": len(tests), "tests_total": len(results), **counts}
    if any(r.get("micro_benchmarks") for r in results):
        from fasttrack.kinds.kernels.micro import micro_benchmarks  # numpy and scipy: only where timed

        found["micro_benchmarks"] = micro_benchmarks(results)
    return found


def describe_points(points: Sequence[str]) -> str:
    return join_limited(points)
