"""Divergence: the rule of one context bucket (`bucket_verdict`, the runner's own) and what
verification re-derives from the recorded buckets. A bucket fails when its mean or 99th-percentile
KL is above its threshold (or not finite), or when its top-1 disagreements show a share above
1 - min_top1_agreement (exact binomial test, `fasttrack.exact`, at TOP1_ALPHA split over the
buckets). A pass needs every bucket to hold positions and to stay within the thresholds at the outcome's
dtype (`fasttrack.manifest.sections.Divergence.thresholds`: the manifest's, or the defaults), never
looser ones recorded in their place; and no non-finite logits.
A fail needs a bucket over a threshold or non-finite logits on the candidate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fasttrack.exact import TOP1_ALPHA, shown_above
from fasttrack.kinds.divergence.measurements import Bucket, DivergenceMeasurements
from fasttrack.kinds.reading import Subject, count, number, status
from fasttrack.manifest.sections import DIVERGENCE_DEFAULTS

DEFAULTS = dict(DIVERGENCE_DEFAULTS)
DEFAULT_EDGES = (0, 512, 1024, 2048, 4096)  # context bucket edges in tokens


def limits_from(cfg: Mapping[str, Any]) -> dict[str, float]:
    """The thresholds of a ``divergence:`` section (its values where it sets them, else DEFAULTS)."""
    return {k: float(v if cfg.get(k) is None else cfg[k]) for k, v in DEFAULTS.items()}


def edges_from(cfg: Mapping[str, Any]) -> list[int]:
    return [int(e) for e in cfg.get("buckets") or DEFAULT_EDGES]


def top1_alpha(edges: Sequence[int], dtypes: int = 1) -> float:
    """TOP1_ALPHA split over the buckets (Bonferroni; the open last one counted) and over the
    ``dtypes`` instances a deployment runs (one per dtype of the scope): the run's budget for
    the check stays TOP1_ALPHA per deployment however many dtypes it declares."""
    return TOP1_ALPHA / max(1, len(edges)) / max(1, dtypes)


def dtype_shares(manifest: Any, dtype: str | None) -> int:
    """How many instances per deployment share the check's top-1 alpha: one per declared dtype
    when the instance runs at a dtype (`Planner.at_every_dtype`), else one."""
    return max(1, len(manifest.scope.dtypes)) if dtype is not None else 1


@dataclass(frozen=True)
class BucketVerdict:
    """Which thresholds one bucket exceeds (a KL that is not finite exceeds its threshold)."""

    mean_over: bool
    p99_over: bool
    top1_below: bool  # the disagreements show a share above 1 - min_top1_agreement
    p_top1: float  # that test's p-value

    @property
    def passed(self) -> bool:
        return not (self.mean_over or self.p99_over or self.top1_below)


def bucket_verdict(
    mean_kl: float | None,
    p99_kl: float | None,
    disagreements: int,
    positions: int,
    limits: Mapping[str, float],
    alpha: float,
) -> BucketVerdict:
    below, p = shown_above(disagreements, positions, 1.0 - limits["min_top1_agreement"], alpha)
    return BucketVerdict(
        mean_over=not (mean_kl is not None and mean_kl <= limits["max_mean_kl"]),
        p99_over=not (p99_kl is not None and p99_kl <= limits["max_p99_kl"]),
        top1_below=below,
        p_top1=p,
    )


def _section(manifest: Any, dtype: str | None = None) -> dict[str, Any]:
    """The manifest's thresholds at ``dtype`` and its bucket edges."""
    declared = manifest.divergence
    if declared is None:
        return {}
    return {**declared.thresholds(dtype), "buckets": declared.buckets}


def limits_of(manifest: Any, dtype: str | None = None) -> dict[str, float]:
    return limits_from(_section(manifest, dtype))


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    state = status(outcome)
    if state not in ("passed", "failed"):
        return []
    m = DivergenceMeasurements.of(outcome)
    buckets = list(m.buckets or ())
    if not buckets:
        return [f"{state}, but it records no context buckets"]
    point = outcome.get("scope_point")
    dtype = point.get("dtype") if isinstance(point, Mapping) else None
    section = _section(subject.manifest, dtype)
    limits, alpha = limits_from(section), top1_alpha(edges_from(section), dtype_shares(subject.manifest, dtype))
    bad = m.non_finite_positions
    over = [f"{b.name}: {', '.join(found)}" for b in buckets if (found := _over(b, limits, alpha))]
    problems: list[str] = []
    if state == "passed":
        for key, value in limits.items():
            if number(m.thresholds.get(key)) != value:
                problems.append(f"it records threshold {key} = {m.thresholds.get(key)}; the manifest's is {value:g}")
        if m.status != "passed":
            problems.append(f"passed, but its comparison says {m.status!r}")
        if count(bad.get("candidate")) or count(bad.get("baseline")):
            problems.append("passed, but non-finite logits are recorded")
        problems.extend(f"passed, but bucket {line}" for line in over)
    elif not any(b.positions and _over(b, limits, alpha) for b in buckets) and not count(bad.get("candidate")):
        problems.append("failed, but every bucket is within the thresholds and no logit is non-finite")
    return problems


def _over(bucket: Bucket, limits: Mapping[str, float], alpha: float) -> list[str]:
    if not bucket.positions:
        return ["no positions"]
    mean, p99, top1 = bucket.mean_kl, bucket.p99_kl, bucket.top1_agreement
    disagreements = bucket.positions if top1 is None else bucket.positions - round(top1 * bucket.positions)
    verdict = bucket_verdict(mean, p99, disagreements, bucket.positions, limits, alpha)
    out = []
    if verdict.mean_over:
        out.append(f"mean KL {mean} > {limits['max_mean_kl']:g}")
    if verdict.p99_over:
        out.append(f"p99 KL {p99} > {limits['max_p99_kl']:g}")
    if verdict.top1_below or top1 is None:
        out.append(f"top-1 agreement {top1} < {limits['min_top1_agreement']:g}")
    return out
