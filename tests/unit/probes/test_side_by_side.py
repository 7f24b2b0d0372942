"""`side_by_side`: both sides' calls at once where both are servers (independent requests), one
after the other otherwise, and each side's failure kept for the caller to attribute."""

from __future__ import annotations

import threading

import pytest

from fasttrack.probes.base import TargetFailure, side_by_side


class Side:
    def __init__(self, independent: bool):
        self.independent_requests = independent


def test_servers_are_asked_at_the_same_time() -> None:
    candidate_started = threading.Event()

    def on_baseline() -> bool:
        return candidate_started.wait(timeout=30)  # True only if the candidate's call runs meanwhile

    def on_candidate() -> str:
        candidate_started.set()
        return "cand"

    base, cand = side_by_side(Side(True), Side(True), on_baseline, on_candidate)
    assert base.get() is True
    assert cand.get() == "cand"


def test_in_process_sides_run_one_after_the_other_stock_first() -> None:
    order: list[str] = []
    base, cand = side_by_side(
        Side(True), Side(False), lambda: order.append("baseline"), lambda: order.append("candidate")
    )
    base.get(), cand.get()
    assert order == ["baseline", "candidate"]


@pytest.mark.parametrize("independent", [True, False])
def test_each_sides_failure_is_raised_where_its_answer_is_read(independent: bool) -> None:
    def fails() -> None:
        raise TargetFailure("candidate refused")

    base, cand = side_by_side(Side(independent), Side(independent), lambda: 1, fails)
    assert base.get() == 1
    with pytest.raises(TargetFailure, match="candidate refused"):
        cand.get()
