"""Preserved-feature probes (``fasttrack.kinds.features.run``): each probe records its own details,
so the shared rule is that a pass names the probe it ran (the outcome's feature) and records
what it compared; where a probe records a bound, the bound is re-checked (``PROBE_RULES``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fasttrack.kinds.reading import Subject, measurements, number, status


def _logprobs(m: Mapping[str, Any], details: Mapping[str, Any]) -> list[str]:
    worst, tolerance = number(m.get("statistic")), number(details.get("tolerance"))
    if worst is None or tolerance is None or worst > tolerance:
        return [f"passed, but its largest logprob difference {worst} is not within the tolerance {tolerance}"]
    return []


def _structured_output(m: Mapping[str, Any], details: Mapping[str, Any]) -> list[str]:
    rows = details.get("schemas")
    if not isinstance(rows, list) or not rows:
        return ["passed, but it records no schema it checked"]
    return []


def _temperature(m: Mapping[str, Any], details: Mapping[str, Any]) -> list[str]:
    p = number(m.get("p_value"))
    if p is None:
        return ["passed, but it records no p-value"]
    return []


# feature name -> the bound its probe records (probes not listed: the shared rule only)
PROBE_RULES: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any]], list[str]]] = {
    "logprobs": _logprobs,
    "structured_output": _structured_output,
    "temperature_sampling": _temperature,
}


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    if status(outcome) != "passed":
        return []
    m = measurements(outcome)
    details = m.get("details")
    if m.get("probe") != outcome.get("name"):
        return [f"passed, but it records probe {m.get('probe')!r}, not {outcome.get('name')!r}"]
    if not isinstance(details, Mapping) or not details:
        return ["passed, but its probe recorded nothing it compared (measurements.details)"]
    rule = PROBE_RULES.get(str(outcome.get("name")))
    return rule(m, details) if rule is not None else []
