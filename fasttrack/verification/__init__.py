"""Re-derive what evidence claims from what it measured: each outcome's status from its own
measurements (each kind's pass rule, ``Kind.check``), and the set of outcomes from the plan the
manifest gives for the run's recorded selection (``coverage``); `verify` is `fasttrack verify`.

Used by `fasttrack verify` (a mismatch is a verification failure, signed or not) and by
``fasttrack check --resume`` (an earlier outcome is reused only when its evidence still verifies).

A rule reads one outcome (plain evidence JSON) and the manifest, and returns its problems: a
``passed`` outcome whose measurements do not show a pass (a failing test counted, a bound past
the margin, a bucket over its threshold, no measurement at all), or a ``failed`` one whose
measurements show nothing that fails. Rules state necessary conditions of each status; they do
not re-run statistics (no numpy or scipy here, so verification runs on a bare CI runner).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fasttrack.kinds.reading import Subject

if TYPE_CHECKING:
    from fasttrack.kinds.base import Kinds
    from fasttrack.manifest import Manifest


def rederive(evidence: Mapping[str, Any], manifest: Manifest, kinds: Kinds) -> list[str]:
    """Every outcome whose recorded status its own measurements do not support, one line each."""
    subject = Subject(manifest, evidence)
    problems: list[str] = []
    for outcome in evidence.get("checks") or ():
        kind = kinds.get(str(outcome.get("kind")))
        if kind is None:
            if outcome.get("status") == "passed" and outcome.get("required", True):
                problems.append(
                    f"{outcome.get('id')}: passed, but this fasttrack knows no kind {outcome.get('kind')!r}"
                )
            continue
        try:
            found = kind.check(outcome, subject)
        except (KeyError, TypeError, ValueError, AttributeError) as err:  # malformed measurements
            found = [f"its measurements are unreadable ({type(err).__name__}: {err})"]
        problems.extend(f"{outcome.get('id')}: {p}" for p in found)
    return problems
