"""Re-derive what evidence claims from what it measured: each outcome's status from its own
measurements (one module per check kind, listed in ``RULES``), and the set of outcomes from the
plan the manifest gives for the run's recorded selection (``coverage``).

Used by `fasttrack verify` (a mismatch is a verification failure, signed or not) and by
``fasttrack check --resume`` (an earlier outcome is reused only when its evidence still verifies).

A rule reads one outcome (plain evidence JSON) and the manifest, and returns its problems: a
``passed`` outcome whose measurements do not show a pass (a failing test counted, a bound past
the margin, a bucket over its threshold, no measurement at all), or a ``failed`` one whose
measurements show nothing that fails. Rules state necessary conditions of each status; they do
not re-run statistics (no numpy or scipy here, so verification runs on a bare CI runner).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from fasttrack.verification import (
    benchmarks,
    claims,
    divergence,
    evals,
    features,
    kernels,
    scope_diff,
    speculative,
    stock_unchanged,
    stress,
    switch,
)
from fasttrack.verification._util import Subject

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest

Rule = Callable[[Mapping[str, Any], Subject], list[str]]

# check kind -> the rule that re-derives its status (every kind of fasttrack.runners.KINDS)
RULES: dict[str, Rule] = {
    "scope_diff": scope_diff.check,
    "switch": switch.check,
    "kernels": kernels.check,
    "stress": stress.check,
    "sanitizer": stress.check_sanitizer,
    "evals": evals.check,
    "divergence": divergence.check,
    "features": features.check,
    "speculative": speculative.check,
    "benchmarks": benchmarks.check,
    "stock_unchanged": stock_unchanged.check,
    "claims": claims.check,
}


def rederive(evidence: Mapping[str, Any], manifest: Manifest) -> list[str]:
    """Every outcome whose recorded status its own measurements do not support, one line each."""
    subject = Subject(manifest, evidence)
    problems: list[str] = []
    for outcome in evidence.get("checks") or ():
        rule = RULES.get(str(outcome.get("kind")))
        if rule is None:
            if outcome.get("status") == "passed" and outcome.get("required", True):
                problems.append(
                    f"{outcome.get('id')}: passed, but this fasttrack knows no kind {outcome.get('kind')!r}"
                )
            continue
        try:
            found = rule(outcome, subject)
        except (KeyError, TypeError, ValueError, AttributeError) as err:  # malformed measurements
            found = [f"its measurements are unreadable ({type(err).__name__}: {err})"]
        problems.extend(f"{outcome.get('id')}: {p}" for p in found)
    return problems
