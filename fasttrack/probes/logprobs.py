"""Returned-logprobs probe: the candidate's logprobs agree with the baseline's.

Greedy requests with ``logprobs=k`` on both sides. Up to the first position where the greedy
tokens differ, the chosen token's logprob must agree within ``max_abs_diff`` (nats). At the first
differing position, vLLM's ``check_logprobs_close`` rule applies: each side's token must be in
the other side's top-k (a near-tie flipped), and comparison stops there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fasttrack.probes.base import (
    CompletionRequest,
    ProbeResult,
    ProbeTarget,
    TargetFailure,
    failed,
    passed,
)
from fasttrack.probes.content import prompts as shipped_prompts

PROBE = "logprobs"


@dataclass(frozen=True)
class LogprobSettings:
    top_logprobs: int = 5
    max_abs_diff: float = 0.05
    prompts: tuple[str, ...] = ()
    max_tokens: int = 24

    @staticmethod
    def from_mapping(values: Mapping[str, Any]) -> LogprobSettings:
        return LogprobSettings(
            int(values.get("top_logprobs", 5)),
            float(values.get("max_abs_diff", 0.05)),
            tuple(values.get("prompts") or shipped_prompts()["greedy"]),
            int(values.get("max_tokens", 24)),
        )


def near_tie(b: Any, c: Any) -> bool:
    """vLLM's check_logprobs_close at a position where the greedy tokens differ: each side's token
    is in the other side's top-k (a near tie that rounding flipped), not a real difference."""
    return b.token_id in c.top and c.token_id in b.top


def probe_logprobs(baseline: ProbeTarget, candidate: ProbeTarget, settings: LogprobSettings) -> ProbeResult:
    worst = 0.0
    cases: list[dict[str, Any]] = []
    for i, prompt in enumerate(settings.prompts):
        request = CompletionRequest(
            prompt, max_tokens=settings.max_tokens, temperature=0.0, logprobs=settings.top_logprobs
        )
        try:
            base = baseline.complete(request)[0]
            cand = candidate.complete(request)[0]
        except TargetFailure as exc:
            return failed(PROBE, f"a logprobs request failed: {exc}", {"cases": cases}, code="target")
        if cand.logprobs is None or len(cand.logprobs) != len(cand.token_ids):
            return failed(
                PROBE, f"the candidate returned no logprobs (or not one per token) for prompt {i}", {"cases": cases}
            )
        if base.logprobs is None:
            return failed(PROBE, "the baseline returned no logprobs", {"cases": cases}, code="target")
        diverged_at = None
        case_worst = 0.0
        for pos, (b, c) in enumerate(zip(base.logprobs, cand.logprobs)):
            if len(c.top) < settings.top_logprobs:
                return failed(
                    PROBE,
                    f"the candidate returned {len(c.top)} top logprobs at position {pos}, asked for {settings.top_logprobs}",
                    {"cases": cases},
                )
            if b.token_id != c.token_id:
                if not near_tie(b, c):
                    return failed(
                        PROBE,
                        (
                            f"greedy tokens differ at position {pos} of prompt {i} and are not in each other's "
                            f"top-{settings.top_logprobs}: baseline {b.token_id} ({b.logprob:.3f}), "
                            f"candidate {c.token_id} ({c.logprob:.3f})"
                        ),
                        {"cases": cases},
                    )
                diverged_at = pos
                break
            diff = abs(b.logprob - c.logprob)
            case_worst = max(case_worst, diff)
            if diff > settings.max_abs_diff:
                return failed(
                    PROBE,
                    (
                        f"logprob of token {c.token_id} at position {pos} of prompt {i} differs by {diff:.3f} nats "
                        f"(baseline {b.logprob:.4f}, candidate {c.logprob:.4f}; tolerance {settings.max_abs_diff})"
                    ),
                    {"cases": cases},
                    statistic=diff,
                )
        worst = max(worst, case_worst)
        cases.append(
            {"prompt": prompt, "tokens": len(cand.token_ids), "max_abs_diff": case_worst, "diverged_at": diverged_at}
        )
    return passed(PROBE, {"cases": cases, "tolerance": settings.max_abs_diff}, statistic=worst)
