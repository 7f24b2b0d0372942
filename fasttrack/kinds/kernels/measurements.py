"""What a kernel-test outcome records: the tests' counts at its scope point, the first 50 tests
with their tolerance and worst error, the micro-benchmarks its tests timed, and (the between-points
instance) the batch sizes run."""

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
class MicroBenchmark(Record):
    """One micro-benchmark a test timed (`fasttrack.kernel_bench`): time per call of the candidate
    and the reference op, the speed-up (reference ÷ candidate) and the time saved per call, each
    median over the pairs with one-sided (1 - alpha) sign-test bounds."""

    test: str | None = None
    test_outcome: str | None = None
    scope_point: Mapping[str, Any] | None = None
    name: str | None = None
    shape: str | None = None
    device: str | None = None
    timer: str | None = None  # cuda_events | perf_counter
    calls: int | None = None  # calls per timed block
    pairs: int | None = None
    alpha: float | None = None
    candidate_us: float | None = None
    reference_us: float | None = None
    speedup: float | None = None
    speedup_ci: tuple[float | None, ...] | None = None
    saved_us: float | None = None
    saved_us_ci: tuple[float | None, ...] | None = None


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
    micro_benchmarks: tuple[MicroBenchmark, ...] | None = None  # where its tests timed any (fasttrack_bench)
