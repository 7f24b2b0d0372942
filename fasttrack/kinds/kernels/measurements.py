"""What a kernel-test outcome records: the tests' counts at its scope point, the first 50 tests
with their tolerance and worst error, and (the between-points instance) the batch sizes run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fasttrack.kinds.measurements import Measurements, Record


@dataclass(frozen=True)
class KernelTest(Record):
    nodeid: str | None = None
    outcome: str | None = None  # passed | failed | error | skipped
    duration_s: float | None = None
    scope_point: Mapping[str, Any] | None = None
    tolerance: Mapping[str, Any] = field(default_factory=dict)  # {"atol", "rtol"}
    worst_error: Mapping[str, Any] = field(default_factory=dict)  # {"abs", "rel"}
    message: str | None = None


@dataclass(frozen=True)
class RequiredTest(Record):
    """A ``required_tests`` pattern at this point: the tests it matched, passed and skipped."""

    pattern: str | None = None
    matched: int | None = None
    passed: int | None = None
    skipped: int | None = None


@dataclass(frozen=True)
class BatchSizes(Measurements):
    """The between-points instance's batch sizes."""

    declared: tuple[Any, ...] | None = None
    between: tuple[Any, ...] | None = None
    policy: str | None = None  # every size, or a seeded sample
    seed: str | None = None
    ran: tuple[Any, ...] | None = None
    failed: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class KernelMeasurements(Measurements):
    tests: tuple[KernelTest, ...] | None = None  # the first rule.MAX_LISTED
    tests_shown: int | None = None
    tests_total: int | None = None
    passed: int | None = None
    failed: int | None = None
    errors: int | None = None
    skipped: int | None = None
    batch_sizes: BatchSizes | None = None
    required_tests: tuple[RequiredTest, ...] | None = None  # the suite's required_tests, when it has any
