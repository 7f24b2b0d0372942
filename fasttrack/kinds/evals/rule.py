"""Evals (``fasttrack.kinds.evals``): a pass needs the recorded bound above ``-margin`` at the
margin the manifest declares, overall and in every bin: the one-sided lower bound of the paired
difference (fixed n, with n at least the items needed), or the confidence sequence's lower bound
in sequential mode; a baseline off the floor; and no non-finite logits. A fail needs an upper
bound below ``-margin`` (overall or in a bin) or non-finite logits on the candidate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.evals.measurements import Bounds, EvalMeasurements, Sequential
from fasttrack.kinds.reading import Subject, count, status


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    manifest = subject.manifest
    state = status(outcome)
    if state not in ("passed", "failed"):
        return []
    m = EvalMeasurements.of(outcome)
    spec = next((e for e in manifest.evals if e.id == outcome.get("name")), None)
    margin = m.margin
    if margin is None:
        return [f"{state}, but it records no margin"]
    problems = []
    if spec is not None and abs(margin - spec.margin) > 1e-12:
        problems.append(f"it was judged at margin {margin:g}; the manifest declares {spec.margin:g}")
    if spec is not None and m.alpha != spec.alpha:
        problems.append(f"it was judged at alpha {m.alpha}; the manifest declares {spec.alpha:g}")
    candidate_bad = count(m.non_finite.get("candidate")) or 0
    used = bool(m.sequential.used)
    groups: list[tuple[str, Bounds]] = [("overall", m)] + [(f"bin {b.name}", b) for b in m.bins or ()]
    if state == "passed":
        if m.status != "passed":
            problems.append(f"passed, but its comparison says {m.status!r}")
        if candidate_bad or count(m.non_finite.get("baseline")):
            problems.append("passed, but non-finite logits are recorded")
        for name, group in groups:
            problems.extend(f"{name}: {p}" for p in _not_a_pass(group, group.sequential, used, margin))
    else:
        failing = candidate_bad > 0 or any(_a_fail(group, group.sequential, used, margin) for _, group in groups)
        if not failing:
            problems.append(f"failed, but no bound is below -{margin:g} and no non-finite logit is recorded")
    return problems


def _not_a_pass(group: Bounds, seq: Sequential, used: bool, margin: float) -> list[str]:
    if group.floor:
        return ["the baseline is at the floor"]
    if used:
        lower = seq.cs_lower
        if seq.decision != "passed" or lower is None or not lower > -margin:
            return [f"the confidence sequence did not settle above -{margin:g} (decision {seq.decision!r})"]
        return []
    lower, n, needed = group.lower_bound, group.n, group.n_needed
    if lower is None or not lower > -margin:
        return [f"lower bound {lower} is not above -{margin:g}"]
    if n is None or needed is None or n < needed:
        return [f"n = {n} is below the {needed} items needed at this margin (underpowered)"]
    return []


def _a_fail(group: Bounds, seq: Sequential, used: bool, margin: float) -> bool:
    upper = seq.cs_upper if used else group.upper_bound
    if used and seq.decision == "failed":
        return True
    return upper is not None and upper < -margin
