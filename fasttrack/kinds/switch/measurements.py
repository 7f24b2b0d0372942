"""What the switch's proof of path records: the decode steps by path with default settings and
with the switches on (per batch), and each switch judged alone (``switches``); or, for the census
proof at a benchmarked point (``#census``), both sides' kernel census and the path counter."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fasttrack.kinds.measurements import Measurements


@dataclass(frozen=True)
class SwitchMeasurements(Measurements):
    expected_path: Any = None  # the path the proof looks for (a list for several switches' census)
    batches: tuple[Any, ...] | None = None
    source: str | None = None  # python | openai
    default_path_counts: Mapping[str, Any] | None = None  # path -> decode steps, switches at default
    candidate_path_counts: Mapping[str, Any] | None = None
    default_by_batch: Mapping[str, Any] | None = None  # batch -> path -> steps
    candidate_by_batch: Mapping[str, Any] | None = None
    switches: Mapping[str, Any] | None = None  # switch -> {path, counter, applies, default_steps, ...}
    note: str | None = None
    inert_outputs_match: bool | None = None  # negative scope: the candidate's answers equal stock's
    log_signatures: Mapping[str, Any] | None = None  # side -> switch -> its log signature seen (None: no log)
    census_by_batch: Mapping[str, Any] | None = None  # census-proven switches: batch -> the census proof there
    # the census proof at a benchmarked point
    proof: str | None = None
    point: Mapping[str, Any] | None = None
    census_rule: Any = None
    baseline_census: str | None = None
    candidate_census: str | None = None
    kernels_per_layer: Mapping[str, Any] | None = None  # side -> kernels per layer
    path_counter: Mapping[str, Any] | None = None  # the candidate's own counter: path -> steps
    census_problems: tuple[Any, ...] | None = None
    census_differences: tuple[Any, ...] | None = None  # operators whose per-step counts differ most
