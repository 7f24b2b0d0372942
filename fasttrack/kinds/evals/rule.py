"""Evals (``fasttrack.kinds.evals``): a pass needs the recorded bound above ``-margin`` at the
margin the manifest declares, overall and in every bin: the one-sided lower bound of the paired
difference (fixed n, with n at least the items needed), or the confidence sequence's lower bound
in sequential mode; a baseline off the floor; no non-finite logits; and, where the eval declares a
``reference``, the candidate's mean within its relative tolerance (`reference_verdict`, vLLM's
lm-eval CI rule, re-derived from the recorded mean). A fail needs an upper bound below ``-margin``
(overall or in a bin), non-finite logits on the candidate, or a mean outside the reference's
tolerance."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.evals.measurements import Bounds, EvalMeasurements, Sequential
from fasttrack.kinds.reading import Subject, count, status

DEFAULT_RTOL = 0.08  # vLLM's .buildkite/lm-eval-harness DEFAULT_RTOL
RULES = ("at_least", "within")  # one-sided (vLLM's today), two-sided (its earlier numpy.isclose)


def reference_of(spec: Mapping[str, Any] | None, metric: str | None = None) -> dict[str, Any] | None:
    """An eval's ``reference`` as the rule reads it: ``value`` (or vLLM's spelling, the entry of
    ``metrics`` named as the eval's metric, optionally ``metric,filter``), ``rtol`` (default
    `DEFAULT_RTOL`) and ``rule`` (default ``at_least``); None without one."""
    if not spec:
        return None
    value = spec.get("value")
    if value is None:
        named = [m for m in spec.get("metrics") or () if metric is None or str(m.get("name")).split(",")[0] == metric]
        value = named[0].get("value") if named else None
    if value is None:
        return None
    rtol = spec.get("rtol")
    return {
        "value": float(value),
        "rtol": float(DEFAULT_RTOL if rtol is None else rtol),
        "rule": str(spec.get("rule") or "at_least"),
    }


def reference_bounds(value: float, rtol: float, rule: str, higher_is_better: bool = True) -> tuple[float, float]:
    """The measured means the reference accepts, [low, high]: ``at_least`` is vLLM's one-sided
    ``measured >= value * (1 - rtol)`` (``<= value * (1 + rtol)`` where lower is better);
    ``within`` the two-sided ``|measured - value| <= rtol * |value|``."""
    slack = rtol * abs(value)
    if rule == "within":
        return value - slack, value + slack
    return (value - slack, math.inf) if higher_is_better else (-math.inf, value + slack)


def reference_verdict(measured: float, value: float, rtol: float, rule: str, higher_is_better: bool = True) -> bool:
    """Whether the candidate's measured mean meets the recorded reference (a point rule, as vLLM's CI)."""
    low, high = reference_bounds(value, rtol, rule, higher_is_better)
    return math.isfinite(measured) and low - 1e-12 <= measured <= high + 1e-12


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
        share = f" (its family {spec.family['name']!r}'s share)" if spec.family else ""
        problems.append(f"it was judged at alpha {m.alpha}; the manifest declares {spec.alpha:g}{share}")
    candidate_bad = count(m.non_finite.get("candidate")) or 0
    used = bool(m.sequential.used)
    groups: list[tuple[str, Bounds]] = [("overall", m)] + [(f"bin {b.name}", b) for b in m.bins or ()]
    problems.extend(_reference_problems(m, spec, state))
    if state == "passed":
        if m.status != "passed":
            problems.append(f"passed, but its comparison says {m.status!r}")
        if candidate_bad or count(m.non_finite.get("baseline")):
            problems.append("passed, but non-finite logits are recorded")
        for name, group in groups:
            problems.extend(f"{name}: {p}" for p in _not_a_pass(group, group.sequential, used, margin))
    else:
        failing = (
            candidate_bad > 0
            or _reference_fails(m)
            or any(_a_fail(group, group.sequential, used, margin) for _, group in groups)
        )
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


def _reference_problems(m: EvalMeasurements, spec: Any, state: str) -> list[str]:
    """The recorded reference is the manifest's, its measured value the candidate's mean, and a
    pass meets it."""
    declared = reference_of((spec.raw.get("reference") if spec is not None else None) or None, m.metric)
    ref = m.reference
    if ref is None or ref.value is None:
        return [f"{state}, but it records no reference check; the manifest declares one"] if declared else []
    problems = []
    if declared is not None and (ref.value, ref.rtol, ref.rule) != (
        declared["value"],
        declared["rtol"],
        declared["rule"],
    ):
        problems.append(
            f"it was held to reference {ref.value} (rtol {ref.rtol}, {ref.rule}); the manifest declares "
            f"{declared['value']:g} (rtol {declared['rtol']:g}, {declared['rule']})"
        )
    mean = m.candidate_mean
    if mean is not None and ref.higher_is_better is False:
        mean = 1.0 - mean  # the comparison's means are oriented (higher is better)
    if ref.measured is None or mean is None or abs(ref.measured - mean) > 1e-9:
        problems.append(f"the reference's measured value {ref.measured} is not the candidate's mean {m.candidate_mean}")
    if state == "passed" and _reference_fails(m):
        problems.append(f"passed, but the candidate's mean {ref.measured} is outside the reference's tolerance")
    return problems


def _reference_fails(m: EvalMeasurements) -> bool:
    ref = m.reference
    if ref is None or ref.value is None or ref.rtol is None or ref.rule is None or ref.measured is None:
        return False
    return not reference_verdict(ref.measured, ref.value, ref.rtol, ref.rule, ref.higher_is_better is not False)
