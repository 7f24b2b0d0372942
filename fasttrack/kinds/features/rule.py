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


MIXED_BATCH_MIN_POWER = 0.8  # = fasttrack.probes.mixed_batch.MIN_POWER (a test keeps them equal)


def _mixed_batches(m: FeatureMeasurements, details: Mapping[str, Any]) -> list[str]:
    rows = details.get("rows")
    if m.p_value is None or not isinstance(rows, list) or not rows:
        return ["passed, but it records no p-value or no rows it compared"]
    power = number(details.get("power_if_greedy_leaks"))
    if power is None or power < MIXED_BATCH_MIN_POWER:
        return [f"passed, but its power against a leaked greedy setting {power} is below {MIXED_BATCH_MIN_POWER}"]
    differing = [
        r for r in rows if isinstance(r, Mapping) and r.get("equal_alone") is False and not r.get("stock_batch_variant")
    ]
    if differing:
        return [f"passed, but greedy row {differing[0].get('row')} differs from the same request alone"]
    return []


# feature name -> the bound its probe records (probes not listed: the shared rule only)
PROBE_RULES: dict[str, Callable[[FeatureMeasurements, Mapping[str, Any]], list[str]]] = {
    "logprobs": _logprobs,
    "structured_output": _structured_output,
    "temperature_sampling": _temperature,
    "mixed_batches": _mixed_batches,
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
