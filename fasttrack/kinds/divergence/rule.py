"""Divergence (``fasttrack.kinds.divergence.run``): a pass needs every context bucket to hold
positions and to stay within the thresholds: the manifest's, or the runner's defaults, never
looser ones recorded in their place; and no non-finite logits. A fail needs a bucket over a
threshold or non-finite logits on the candidate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.reading import Subject, count, mapping, measurements, number, status

# fasttrack.kinds.divergence.run.DEFAULTS (that module needs numpy; a test keeps the two equal)
DEFAULTS = {"max_mean_kl": 0.01, "max_p99_kl": 0.1, "min_top1_agreement": 0.98}


def limits_of(manifest: Any) -> dict[str, float]:
    declared = manifest.divergence
    out = dict(DEFAULTS)
    if declared is not None:
        for key in DEFAULTS:
            value = getattr(declared, key, None)
            if value is not None:
                out[key] = float(value)
    return out


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    manifest = subject.manifest
    state = status(outcome)
    if state not in ("passed", "failed"):
        return []
    m = measurements(outcome)
    buckets = [b for b in m.get("buckets") or () if isinstance(b, Mapping)]
    if not buckets:
        return [f"{state}, but it records no context buckets"]
    limits = limits_of(manifest)
    bad = mapping(m.get("non_finite_positions"))
    over = [f"{b.get('name')}: {', '.join(found)}" for b in buckets if (found := _over(b, limits))]
    problems: list[str] = []
    if state == "passed":
        recorded = mapping(m.get("thresholds"))
        for key, value in limits.items():
            if number(recorded.get(key)) != value:
                problems.append(f"it records threshold {key} = {recorded.get(key)}; the manifest's is {value:g}")
        if m.get("status") != "passed":
            problems.append(f"passed, but its comparison says {m.get('status')!r}")
        if count(bad.get("candidate")) or count(bad.get("baseline")):
            problems.append("passed, but non-finite logits are recorded")
        problems.extend(f"passed, but bucket {line}" for line in over)
    elif not any(count(b.get("positions")) and _over(b, limits) for b in buckets) and not count(bad.get("candidate")):
        problems.append("failed, but every bucket is within the thresholds and no logit is non-finite")
    return problems


def _over(bucket: Mapping[str, Any], limits: Mapping[str, float]) -> list[str]:
    if not count(bucket.get("positions")):
        return ["no positions"]
    mean, p99, top1 = (number(bucket.get(k)) for k in ("mean_kl", "p99_kl", "top1_agreement"))
    out = []
    if mean is None or mean > limits["max_mean_kl"]:
        out.append(f"mean KL {mean} > {limits['max_mean_kl']:g}")
    if p99 is None or p99 > limits["max_p99_kl"]:
        out.append(f"p99 KL {p99} > {limits['max_p99_kl']:g}")
    if top1 is None or top1 < limits["min_top1_agreement"]:
        out.append(f"top-1 agreement {top1} < {limits['min_top1_agreement']:g}")
    return out
