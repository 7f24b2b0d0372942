"""The n > 1 probe's greedy rule: identical rows, equal to the baseline's or a near-tie flip."""

from __future__ import annotations

from fasttrack.probes.base import Completion, TokenLogprob
from fasttrack.probes.n_samples import NSettings, probe_n_samples


def tok(token_id: int, top: dict[int, float]) -> TokenLogprob:
    return TokenLogprob(token_id, top[token_id], top)


class Side:
    """Sampled rows differ by seed; greedy rows are given."""

    def __init__(self, greedy_rows: list[tuple[str, tuple[TokenLogprob, ...]]]):
        self.greedy_rows = greedy_rows

    def complete(self, request):
        if request.temperature == 0.0:
            return [Completion(text, tuple(t.token_id for t in lps), "length", lps) for text, lps in self.greedy_rows]
        return [Completion(f"s{request.seed}-{i}", (i,), "length") for i in range(request.n)]


SETTINGS = NSettings.from_mapping({"n": 2, "prompts": ["p"]})
SAME = (tok(1, {1: -0.1, 2: -2.5}), tok(3, {3: -0.2, 4: -3.0}))
NEAR_TIE = (tok(1, {1: -0.1, 2: -2.5}), tok(4, {4: -0.69, 3: -0.70}))  # 3 and 4 almost tied at position 1
FAR = (tok(1, {1: -0.1, 2: -2.5}), tok(9, {9: -0.1, 8: -3.0}))  # 9 is not in the baseline's top


def run(base_rows, cand_rows):
    return probe_n_samples(Side(base_rows), Side(cand_rows), SETTINGS)


def test_identical_greedy_rows_pass():
    assert run([("ac", SAME)] * 2, [("ac", SAME)] * 2).passed


def test_a_near_tie_flip_passes_and_is_recorded():
    result = run([("ac", (SAME[0], tok(3, {3: -0.70, 4: -0.69 - 0.02})))] * 2, [("ad", NEAR_TIE)] * 2)
    assert result.passed, result.reason
    assert result.details["cases"][0]["greedy_diverged_at"] == 1


def test_a_token_outside_the_other_sides_top_fails_with_both_outputs():
    result = run([("ac", SAME)] * 2, [("az", FAR)] * 2)
    assert not result.passed and "and not by a near tie" in result.reason and "(candidate: 'az')" in result.reason


def test_rows_of_one_greedy_request_that_differ_fail():
    result = run([("ac", SAME)] * 2, [("ac", SAME), ("ad", NEAR_TIE)])
    assert not result.passed and "rows of one greedy n=2 request differ" in result.reason
