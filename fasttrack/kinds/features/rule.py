"""Preserved-feature probes: each probe records its own details, so the shared rule is that a
pass names the probe it ran (the outcome's feature) and records what it compared; where a probe
records a bound, the bound is re-checked (``PROBE_RULES``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fasttrack.kinds.features.measurements import FeatureMeasurements
from fasttrack.kinds.reading import Subject, number, status


def _logprobs(m: FeatureMeasurements, details: Mapping[str, Any]) -> list[str]:
    worst, tolerance = m.statistic, number(details.get("tolerance"))
    if worst is None or tolerance is None or worst > tolerance:
        return [f"passed, but its largest logprob difference {worst} is not within the tolerance {tolerance}"]
    return []


def _structured_output(m: FeatureMeasurements, details: Mapping[str, Any]) -> list[str]:
    rows = details.get("schemas")
    if not isinstance(rows, list) or not rows:
        return ["passed, but it records no schema it checked"]
    return []


def _temperature(m: FeatureMeasurements, details: Mapping[str, Any]) -> list[str]:
    if m.p_value is None:
        return ["passed, but it records no p-value"]
    return []


# feature name -> the bound its probe records (probes not listed: the shared rule only)
PROBE_RULES: dict[str, Callable[[FeatureMeasurements, Mapping[str, Any]], list[str]]] = {
    "logprobs": _logprobs,
    "structured_output": _structured_output,
    "temperature_sampling": _temperature,
}


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    if status(outcome) != "passed":
        return []
    m = FeatureMeasurements.of(outcome)
    details = m.details
    if m.probe != outcome.get("name"):
        return [f"passed, but it records probe {m.probe!r}, not {outcome.get('name')!r}"]
    if not details:
        return ["passed, but its probe recorded nothing it compared (measurements.details)"]
    rule = PROBE_RULES.get(str(outcome.get("name")))
    return rule(m, details) if rule is not None else []
