"""What an eval comparison records: the task, metric, margin and alpha it was judged at; the
paired difference with its interval, one-sided bounds, minimum detectable effect and the items it
needs; flips and McNemar's p; the same per length bin; the sequential state; non-finite logits;
the items side by side (``samples``); the baseline cache and timings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fasttrack.kinds.measurements import Comparable, Measurements, Record


@dataclass(frozen=True)
class Sequential(Record):
    used: bool | None = None
    decision: str | None = None  # passed | failed | inconclusive (None: not used)
    cs_lower: float | None = None  # the confidence sequence's bounds where it stopped
    cs_upper: float | None = None


@dataclass(frozen=True)
class Bounds(Record):
    """The paired comparison of one group of items: all of them, or one length bin."""

    name: str | None = None  # the bin's name (None overall)
    n: int | None = None
    diff: float | None = None  # mean paired difference, candidate - baseline
    ci_low: float | None = None
    ci_high: float | None = None
    lower_bound: float | None = None  # one-sided (1 - alpha)
    upper_bound: float | None = None
    n_needed: int | None = None  # items this margin needs
    margin: float | None = None  # the margin this group was judged at (a bin's own: bins.margin)
    floor: Any = None  # the baseline at the floor (a min_score check records a mapping)
    status: str | None = None
    passed: bool | None = None
    sequential: Sequential = field(default_factory=Sequential)


@dataclass(frozen=True)
class Reference(Record):
    """The candidate's mean against a recorded reference value (``evals[].reference``, vLLM's
    lm-eval CI rule): a point rule, re-derived by `rule.reference_verdict`."""

    value: float | None = None  # the expected value
    rtol: float | None = None  # relative tolerance
    rule: str | None = None  # at_least (one-sided) | within (two-sided)
    measured: float | None = None  # the candidate's mean over the items compared
    low: float | None = None  # the accepted means, [low, high] (None: unbounded)
    high: float | None = None
    higher_is_better: bool | None = None
    passed: bool | None = None


@dataclass(frozen=True)
class Sample(Record):
    """One item as both sides answered it."""

    doc_id: Any = None
    bin: Any = None
    prompt: Any = None
    baseline_output: Any = None
    candidate_output: Any = None
    baseline_score: Any = None
    candidate_score: Any = None
    flipped: Any = None


@dataclass(frozen=True)
class EvalMeasurements(Measurements, Bounds):
    task: str | None = None
    metric: str | None = None
    margin: float | None = None  # the non-inferiority margin it was judged at
    alpha: float | None = None
    n_max: int | None = None
    baseline_mean: float | None = None
    candidate_mean: float | None = None
    candidate_mean_ci: tuple[float | None, ...] | None = None  # one-sided bounds of the candidate's mean
    mde: float | None = None  # minimum detectable effect
    p_mcnemar: float | None = None
    flips: Mapping[str, Any] = field(default_factory=dict)  # right_to_wrong, wrong_to_right
    non_finite: Mapping[str, Any] = field(default_factory=dict)  # side -> items with non-finite logits
    bins: tuple[Bounds, ...] | None = None
    samples: tuple[Sample, ...] | None = None
    cache: Mapping[str, Any] = field(default_factory=dict)  # the baseline cache's hits and their cost
    timings: Mapping[str, Any] = field(default_factory=dict)  # seconds per side
    reference: Reference | None = None  # the candidate's mean against a recorded reference (rtol)
    family: Mapping[str, Any] | None = None  # eval_families: name, alpha, correction, members, adjusted_alpha

    def compared(self) -> Comparable | None:
        return Comparable("candidate mean", self.candidate_mean, self.candidate_mean_ci)
