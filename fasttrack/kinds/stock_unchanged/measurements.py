"""What the stock-unchanged check records: the commits and prompts compared, whether any file of
the stock path changed, and how far stock at head and at the base commit differ."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fasttrack.kinds.measurements import Measurements


@dataclass(frozen=True)
class StockUnchangedMeasurements(Measurements):
    base: str | None = None
    head: str | None = None
    prompts: int | None = None
    max_tokens: int | None = None
    gated_paths: tuple[str, ...] | None = None
    identical_stock_files: bool | None = None  # no file of the stock path changed: nothing to compare
    stock_files_changed: tuple[Any, ...] | None = None  # (the first 50)
    requests: int | None = None  # requests compared
    tokens: int | None = None  # tokens compared
    max_logprob_diff: float | None = None  # the largest logprob difference, base against head
    logprob_atol: float | None = None  # the tolerance it was judged against
    first_mismatch: Any = None  # where the greedy tokens first differed
    worst_at: str | None = None
    exact: bool | None = None  # a switch's exactness promise: candidate against stock at head, tolerance 0
    switches_on: tuple[str, ...] | None = None  # the candidate's switches (the promising one)
