"""What a claims outcome records: the claim, what it states and claims, the lint's labels and
verdict (``lint``: the manifest-only lint; otherwise a benchmark's judgement at one point, with
what it measured)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fasttrack.kinds.measurements import Measurements


@dataclass(frozen=True)
class ClaimMeasurements(Measurements):
    claim_id: str | None = None
    benchmark_id: str | None = None
    statement: str | None = None
    claimed: Any = None  # what the claim states (values, speedup)
    measured: Any = None  # what a benchmark measured at the point (None for the lint)
    labels: tuple[str, ...] | None = None  # special conditions: synthetic_acceptance, prefill_excluded ...
    differences: tuple[Any, ...] | None = None  # setup keys in which baseline and candidate differ
    errors: tuple[Any, ...] | None = None  # why the claim is malformed
    status: str | None = None  # the lint's or the judgement's word (comparable, labelled, reproduced ...)
    assessment: str | None = None  # one line for people
    lint: bool | None = None  # the manifest-only lint (else a benchmark's judgement)
    here: str | None = None
    setups: Mapping[str, Any] | None = None
    point: Mapping[str, Any] | None = None
