"""The planted long-context bug of the example (mini_k3/faults.py) is invisible to short inputs:
a kernel-style comparison against the stock path passes below the bug's position and fails past it."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mini-k3"

AFTER = 24


@pytest.fixture(scope="module")
def sides():
    from mini_k3 import faults

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield (
            faults.create(latency_specialized=False),
            faults.create(long_context_bug_after=AFTER, latency_specialized=True),
        )
    finally:
        torch.set_num_threads(threads)


def test_short_inputs_match_the_stock_path(sides):
    stock, buggy = sides
    ids = list(range(40, 40 + AFTER))  # every position before the bug's
    torch.testing.assert_close(buggy.next_token_logprobs(ids), stock.next_token_logprobs(ids), rtol=1.3e-6, atol=1e-4)


def test_positions_past_the_bug_diverge_and_only_those(sides):
    stock, buggy = sides
    ids = list(range(40, 40 + 3 * AFTER))
    a, b = stock.next_token_logprobs(ids), buggy.next_token_logprobs(ids)
    gap = (a - b).abs().amax(dim=1)
    assert float(gap[:AFTER].max()) < 1e-4
    assert float(gap[AFTER + 8 :].min()) > 0.01


def test_only_the_candidate_gets_the_bug():
    from mini_k3 import faults

    with pytest.raises(ValueError, match="tensor_parallel_size 1"):
        faults.create(long_context_bug_after=AFTER, latency_specialized=True, tensor_parallel_size=2)
    stock = faults.create(long_context_bug_after=AFTER, latency_specialized=False)
    assert "forward" not in vars(stock.engine.model)  # the model's own forward, not the planted one
