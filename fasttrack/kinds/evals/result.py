"""The result of one eval comparison (`EvalComparison`): the overall and per-bin comparisons, the
decision and why, the items side by side, and the measurements it becomes in the evidence."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fasttrack import stats as S


@dataclass(frozen=True)
class BinResult:
    name: str
    comparison: S.PairedComparison
    decision: S.Decision
    sequential: S.SequentialResult | None = None

    def to_dict(self) -> dict[str, Any]:
        c = self.comparison
        return {
            "name": self.name,
            "n": c.n,
            "baseline_mean": _num(c.baseline_mean),
            "candidate_mean": _num(c.candidate_mean),
            "diff": _num(c.diff),
            "ci_low": _num(c.ci_low),
            "ci_high": _num(c.ci_high),
            "lower_bound": _num(c.lower_bound),
            "upper_bound": _num(c.upper_bound),
            "mde": _num(c.mde),
            "n_needed": c.n_needed,
            "margin": c.margin,  # the bin's own (``bins.margin``) or the eval's
            "floor": c.at_floor,
            "passed": self.decision.status == S.PASSED,
            "status": self.decision.status,
            "reason": self.decision.reason,
            "sequential": self.sequential.to_dict() if self.sequential else None,
        }


@dataclass(frozen=True)
class EvalComparison:
    """The outcome of one eval comparison and everything a reviewer needs to check it."""

    eval_id: str
    task: str
    metric: str
    status: str  # passed | failed | errored | not_run
    reason_code: str | None
    reason: str
    n_max: int = 0
    margin: float = 0.0
    alpha: float = 0.05
    overall: S.PairedComparison | None = None
    bins: tuple[BinResult, ...] = ()
    sequential: S.SequentialResult | None = None
    samples: tuple[dict[str, Any], ...] = ()
    non_finite: Mapping[str, int] = field(default_factory=dict)  # side -> responses
    cache: Mapping[str, Any] = field(default_factory=dict)
    timings: Mapping[str, float] = field(default_factory=dict)
    items: tuple[dict[str, Any], ...] = ()  # every compared item (scores, hashes, bin): the items.jsonl artifact
    floor: Mapping[str, Any] | None = None  # min_score: the candidate's mean against an absolute floor
    options: Mapping[str, Any] = field(default_factory=dict)  # lm-eval options applied (num_fewshot ...)
    reference: Mapping[str, Any] | None = None  # the candidate's mean against a recorded reference (rtol)
    family: Mapping[str, Any] | None = None  # eval_families: the family whose alpha this test shares

    def to_measurements(self) -> dict[str, Any]:
        c = self.overall
        m: dict[str, Any] = {
            "task": self.task,
            "metric": self.metric,
            "n": c.n if c else 0,
            "n_max": self.n_max,
            "margin": self.margin,
            "alpha": self.alpha,
            "status": self.status,
            "reason": self.reason,
            "non_finite": dict(self.non_finite),
            "cache": dict(self.cache),
            "timings": dict(self.timings),
        }
        if self.floor is not None:
            m["min_score"] = dict(self.floor)  # "floor" below is the baseline-at-floor flag
        if self.options:
            m["lm_eval_options"] = dict(self.options)
        if self.reference is not None:
            m["reference"] = dict(self.reference)
        if self.family is not None:
            m["family"] = dict(self.family)
        if c is not None:
            d = c.to_dict()
            m.update(
                {
                    k: d[k]
                    for k in (
                        "baseline_mean",
                        "candidate_mean",
                        "diff",
                        "ci_low",
                        "ci_high",
                        "lower_bound",
                        "upper_bound",
                        "mde",
                        "n_needed",
                        "p_mcnemar",
                        "flips",
                        "unpaired_se",
                        "se",
                    )
                }
            )
            m["floor"] = c.at_floor
            # one-sided (1 - alpha) bounds of the candidate's own mean, for --previous
            bounds = S.mean_bounds([float(i["candidate_score"]) for i in self.items], self.alpha)
            m["candidate_mean_ci"] = list(bounds) if bounds else None
        m["bins"] = [b.to_dict() for b in self.bins]
        seq = self.sequential
        m["sequential"] = (
            seq.to_dict() if seq else {"used": False, "max": self.n_max, "stopped_early": False, "decision": None}
        )
        m["samples"] = list(self.samples)
        return m


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _errored(cfg: Mapping[str, Any], code: str, reason: str, **kw: Any) -> EvalComparison:
    return EvalComparison(
        str(cfg.get("id", cfg.get("task"))), str(cfg.get("task")), str(cfg.get("metric")), "errored", code, reason, **kw
    )
