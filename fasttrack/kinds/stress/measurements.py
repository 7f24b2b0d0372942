"""What the stress audit records: how it repeated the audited test, and how many distinct results
each test gave over its repeats."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fasttrack.kinds.measurements import Measurements
from fasttrack.kinds.reading import count


@dataclass(frozen=True)
class StressMeasurements(Measurements):
    repeats: int | None = None  # runs of each audited test
    delay_env: str | None = None  # the variable the delays are injected through
    delays_us: tuple[Any, ...] | None = None
    tests: int | None = None  # audited tests
    runs: int | None = None  # test runs in all (tests x repeats)
    distinct_results: Mapping[str, Any] | None = None  # test -> distinct result digests over its repeats
    first_mismatch: int | None = None  # the first repeat that differed
    digests_recorded: bool | None = None
    failed_runs: int | None = None
    tool: str | None = None

    @property
    def varied(self) -> list[str]:
        """The tests that gave more than one result over their repeats."""
        return varied_tests(self.distinct_results or {})


def varied_tests(distinct: Mapping[str, Any]) -> list[str]:
    """The tests of ``distinct`` (test -> distinct results) that gave more than one result."""
    return sorted(test for test, n in distinct.items() if (count(n) or 0) > 1)
