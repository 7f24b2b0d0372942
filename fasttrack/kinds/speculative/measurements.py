"""What the speculative-decoding check records: greedy outputs against plain decoding, and the
acceptance counters over the comparison."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fasttrack.kinds.measurements import Measurements


@dataclass(frozen=True)
class SpeculativeMeasurements(Measurements):
    draft_length: int | None = None
    min_acceptance_length: float | None = None  # the declared minimum it judged against
    greedy_equal: bool | None = None  # greedy outputs equal to non-speculative decoding
    mismatch_at: Any = None  # {"prompt", "token"} of the first difference
    acceptance_length: float | None = None  # tokens emitted per drafting step
    drafts: int | None = None  # verification steps that proposed a draft
    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    cases: tuple[Any, ...] | None = None  # per prompt: tokens, where it differed, its acceptance length
    acceptance_margin: float | None = None  # the non-inferiority margin against stock it judged with
    stock_acceptance_length: float | None = None  # stock's, same prompts and draft length
    stock_drafts: int | None = None
    stock_accepted_tokens: int | None = None
    acceptance_ratio: float | None = None  # candidate / stock
    stock_per_prompt: tuple[Any, ...] | None = None  # stock's acceptance length per prompt
