"""Kernel tests: the status follows from the test counts and the per-test outcomes recorded
(``fasttrack.kinds.kernels.run``): passed needs at least one passing test and no failing one;
failed needs a failing one. The listed tests (the first 50) must agree with the counts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.kernels.measurements import KernelMeasurements
from fasttrack.kinds.reading import Subject, status

COUNTED = {"passed": "passed", "failed": "failed", "error": "errors"}
MAX_LISTED = 50  # tests listed per outcome (the runner lists the first MAX_LISTED)


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    state = status(outcome)
    m = KernelMeasurements.of(outcome)
    if state not in ("passed", "failed"):
        return []
    counts = {"passed": m.passed, "failed": m.failed, "errors": m.errors, "skipped": m.skipped}
    total = m.tests_total
    tests = m.tests
    if None in counts.values() or total is None or tests is None:
        return [f"{state}, but it records no test counts (measurements.passed/failed/errors/skipped, tests)"]
    problems = []
    if sum(v or 0 for v in counts.values()) != total:
        problems.append(f"its test counts {counts} do not add up to tests_total {total}")
    if len(tests) != min(total, MAX_LISTED):
        problems.append(f"it lists {len(tests)} tests for tests_total {total}")
    listed = {key: 0 for key in COUNTED.values()}
    for test in tests:
        key = COUNTED.get(str(test.outcome))
        if key:
            listed[key] += 1
    for key, n in listed.items():
        if n > (counts[key] or 0):
            problems.append(f"it lists {n} test(s) with outcome {key} but counts {counts[key]}")
    failing = (counts["failed"] or 0) + (counts["errors"] or 0)
    if state == "passed":
        if failing:
            problems.append(f"passed, but {failing} kernel test(s) failed or errored here")
        if not counts["passed"]:
            problems.append("passed, but no kernel test passed here")
        problems.extend(_required(m, subject, str(outcome.get("name"))))
    elif not failing:
        problems.append("failed, but no kernel test failed here")
    return problems


def _required(m: KernelMeasurements, subject: Subject, name: str) -> list[str]:
    """A pass needs every ``required_tests`` pattern of its suite to have a passing test here
    (the between-points instance, ``<id>~between``, has its own rule)."""
    suite = next((k for k in subject.manifest.kernel_tests if k.id == name), None)
    patterns = tuple(suite.required_tests) if suite is not None else ()
    recorded = {r.pattern: r for r in m.required_tests or ()}
    problems = []
    for pattern in patterns:
        r = recorded.get(pattern)
        if r is None or not r.passed:
            problems.append(f"passed, but its required test(s) {pattern!r} did not pass here")
    return problems
