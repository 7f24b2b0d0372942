"""Claims (``fasttrack.kinds.claims.run``): the lint reads only the manifest, so its outcome is
re-derived exactly by linting the claim again: malformed is errored, not comparable is not_run,
comparable is passed. Outcomes a benchmark gave a claim at one scope point (``claims/ID@point``)
are never required and carry their own measurements; they are left as recorded, except a claim
about kernel micro-benchmarks, whose pass or failure is re-derived from the bounds it records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.claims import lint as C
from fasttrack.kinds.claims.measurements import ClaimMeasurements
from fasttrack.kinds.kernels.judge import NOT_REPRODUCED, REPRODUCED, decide
from fasttrack.kinds.reading import Subject, status


def lint_status(lint: C.ClaimLint) -> tuple[str, bool]:
    """The claims lint's outcome, as its runner records it and `check` re-derives it: (status,
    required): malformed is errored and required, not comparable is not_run, comparable passed."""
    expected = "errored" if lint.errors else ("not_run" if not lint.comparable else "passed")
    return expected, expected == "errored"


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    ident = str(outcome.get("id"))
    if "@" in ident:
        if outcome.get("required", True):
            return ["a benchmark's claim outcome is marked required"]
        return _micro_benchmark_claim(outcome, subject)
    found = _claim(subject, str(outcome.get("name")))
    if found is None:
        return ["the manifest has no such claim"]
    expected, required = lint_status(C.lint_claim(*found, C.switch_args(subject.manifest.data)))
    if status(outcome) != expected:
        return [f"recorded {status(outcome)}; linting the manifest's claim gives {expected}"]
    if outcome.get("required", True) != required:
        return [
            f"recorded required={outcome.get('required')}; a {expected} claims outcome is {'required' if expected == 'errored' else 'not required'}"
        ]
    return []


def _micro_benchmark_claim(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    """A claim about kernel micro-benchmarks (`fasttrack.kinds.kernels.micro`): passed needs its
    decision re-derived from the recorded bounds to be reproduced, failed not reproduced."""
    m = ClaimMeasurements.of(outcome)
    if "micro_benchmark" not in (m.labels or ()) or status(outcome) not in ("passed", "failed"):
        return []
    claim = next(
        (
            c
            for suite in subject.manifest.kernel_tests
            for c in suite.raw.get("claims") or ()
            if c.get("id") == m.claim_id
        ),
        None,
    )
    if claim is None:
        return [f"the manifest's kernel tests have no claim {m.claim_id!r}"]
    measured = m.measured if isinstance(m.measured, Mapping) else {}
    decided = decide(claim, [b for b in measured.get("benchmarks") or () if isinstance(b, Mapping)])
    wanted = {"passed": REPRODUCED, "failed": NOT_REPRODUCED}[status(outcome)]
    if decided != wanted:
        return [f"{status(outcome)}, but its recorded micro-benchmark bounds give {decided or 'no decision'}"]
    return []


def _claim(subject: Subject, claim_id: str) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    for bench in subject.manifest.section("benchmarks") or ():
        for claim in bench.get("claims") or ():
            if str(claim.get("id")) == claim_id:
                return bench, claim
    return None
