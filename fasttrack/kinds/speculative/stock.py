"""Acceptance against stock: the candidate's acceptance length beside stock's on the same prompts.

An absolute floor lets a drafter that got worse pass as long as it stays above the floor (an
off-by-one draft drops acceptance from 1.75 to 1.24, still above 1.2). The stock side runs the
same greedy prompts at the same draft length, and the candidate must reach at least
``(1 - margin)`` of stock's acceptance length (``scope.speculative.acceptance_margin``, default
10 %). Greedy decoding makes both lengths deterministic functions of the prompt set, so the
comparison is paired by construction and has no sampling error to bound: the per-prompt lengths
are recorded for the reviewer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fasttrack.kinds.speculative.rule import DEFAULT_MARGIN, below_stock
from fasttrack.probes.base import CompletionRequest, ProbeTarget, SpeculativeCounters

if TYPE_CHECKING:
    from fasttrack.kinds.speculative.run import SpeculativeResult

__all__ = ["DEFAULT_MARGIN", "below_stock", "judge_against_stock", "per_prompt_acceptance"]


def per_prompt_acceptance(
    target: ProbeTarget, prompts: Sequence[str], max_tokens: int
) -> tuple[SpeculativeCounters | None, list[float | None]]:
    """The target's counters over greedy requests for ``prompts`` (one at a time, so each prompt's
    own delta is its acceptance), and each prompt's acceptance length."""
    start = current = target.speculative_counters()
    lengths: list[float | None] = []
    for prompt in prompts:
        target.complete(CompletionRequest(prompt, max_tokens=max_tokens, temperature=0.0))
        after = target.speculative_counters()
        lengths.append(None if after is None or current is None else after.minus(current).acceptance_length)
        current = after
    if start is None or current is None:
        return None, lengths
    return current.minus(start), lengths


def judge_against_stock(
    result: SpeculativeResult,
    stock: SpeculativeCounters | None,
    stock_per_prompt: Sequence[float | None],
    margin: float,
) -> SpeculativeResult:
    """``result`` (the candidate's own verdict) with stock's acceptance beside it: a pass becomes a
    fail when the candidate falls more than ``margin`` below stock, and not_run when stock's
    acceptance cannot be measured (nothing unjudged passes)."""
    stock_length = stock.acceptance_length if stock is not None else None
    length = result.measurements.get("acceptance_length")
    measurements: dict[str, Any] = {
        **result.measurements,
        "acceptance_margin": margin,
        "stock_acceptance_length": stock_length,
        "stock_drafts": stock.drafts if stock is not None else None,
        "stock_accepted_tokens": stock.accepted_tokens if stock is not None else None,
        "acceptance_ratio": (length / stock_length) if length is not None and stock_length else None,
        "stock_per_prompt": list(stock_per_prompt),
    }
    judged = replace(result, measurements=measurements)
    if result.status != "passed":
        return judged
    draft_length = measurements.get("draft_length")
    if stock_length is None:
        return replace(
            judged,
            status="not_run",
            reason_code="dependency",
            reason=(
                f"stock proposed no draft (or reports no speculative counters) at draft length {draft_length}, "
                "so the candidate's acceptance cannot be compared with stock's"
            ),
        )
    if length is None or below_stock(length, stock_length, margin):
        ratio = f"ratio {length / stock_length:.3f}" if length is not None else "no length of its own"
        shown = f"{length:.2f}" if length is not None else "none"
        return replace(
            judged,
            status="failed",
            reason_code="regression",
            reason=(
                f"mean acceptance length {shown} tokens/step at draft length {draft_length} is more than "
                f"{margin:.0%} below stock's {stock_length:.2f} on the same prompts ({ratio}, "
                f"at least {1.0 - margin:.2f} needed)"
            ),
        )
    return judged
