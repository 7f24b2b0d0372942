"""The mixed-batch probe over the fake target: clean rows pass; a parameter leaking across the
rows of one batch (the issue's planted class: every row sampled with the first row's
temperature/top_p) fails, whichever row comes first; a logprobs or max_tokens leak fails too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from fasttrack.probes.base import Completion, CompletionRequest
from fasttrack.probes.fake import FakeTarget
from fasttrack.probes.mixed_batch import MixedBatchSettings, mixed_rows, probe_mixed_batches

SETTINGS = MixedBatchSettings(samples=200, alpha=0.01)


class FirstRowSampling(FakeTarget):
    """A batching bug: every row of a batch is sampled with the first row's temperature and top_p."""

    def complete_batch(self, requests: Sequence[CompletionRequest]) -> list[list[Completion]]:
        first = requests[0]
        return super().complete_batch([replace(r, temperature=first.temperature, top_p=first.top_p) for r in requests])


class FirstRowLogprobs(FakeTarget):
    """Another leak: the first row's logprobs setting applies to every row."""

    def complete_batch(self, requests: Sequence[CompletionRequest]) -> list[list[Completion]]:
        first = requests[0]
        return super().complete_batch([replace(r, logprobs=first.logprobs) for r in requests])


class LongestMaxTokens(FakeTarget):
    """Another leak: rows run to the batch's longest max_tokens."""

    def complete_batch(self, requests: Sequence[CompletionRequest]) -> list[list[Completion]]:
        longest = max(r.max_tokens for r in requests)
        return super().complete_batch([replace(r, max_tokens=longest) for r in requests])


def test_the_batch_mixes_every_per_request_parameter():
    rows = mixed_rows(SETTINGS, "ab")
    requests = [r.request for r in rows]
    assert {r.kind for r in rows} == {"greedy", "sampled"}
    assert len({(q.temperature, q.top_p) for q in requests}) >= 4
    assert len({q.max_tokens for q in requests}) >= 3 and len({q.seed for q in requests}) >= 3
    assert any(q.stop for q in requests) and any(q.json_schema for q in requests)
    assert {q.logprobs is None for q in requests} == {True, False}


@pytest.mark.parametrize("noise_seed", [0, 1, 2])
def test_clean_candidates_pass(noise_seed):
    result = probe_mixed_batches(
        FakeTarget("baseline"), FakeTarget("candidate", noise=1e-4, noise_seed=noise_seed), SETTINGS
    )
    assert result.status == "passed", result.reason
    assert result.details["power_if_greedy_leaks"] >= 0.8
    assert all(r["equal_alone"] for r in result.details["rows"] if r["kind"] == "greedy")
    assert {t["order"] for t in result.details["tests"]} == {"greedy_first", "sampled_first"}


def test_first_row_sampling_parameters_leaking_into_the_batch_fail():
    result = probe_mixed_batches(FakeTarget("baseline"), FirstRowSampling("candidate"), SETTINGS)
    assert result.status == "failed"
    assert "mixed batch" in result.reason
    # with the greedy row first, the sampled rows come out greedy: their own distribution test fails
    greedy_first = [t for t in result.details["tests"] if t["order"] == "greedy_first" and "p_value" in t]
    assert min(t["p_value"] for t in greedy_first) < result.details["per_test_alpha"]


def test_the_leak_fails_when_a_sampled_row_comes_first_too():
    """With the sampled row first, the greedy rows are sampled: they differ from the same request alone."""
    result = probe_mixed_batches(FakeTarget("baseline"), FirstRowSampling("candidate"), SETTINGS)
    problems = [r for r in result.details["rows"] if r["order"] == "sampled_first" and r.get("equal_alone") is False]
    assert problems, result.details["rows"]


@pytest.mark.parametrize("leaky", [FirstRowLogprobs, LongestMaxTokens])
def test_other_per_request_parameters_leaking_fail(leaky):
    result = probe_mixed_batches(FakeTarget("baseline"), leaky("candidate"), SETTINGS)
    assert result.status == "failed" and "per-request parameters are not kept" in result.reason, result.reason


def test_stock_with_the_same_batch_variance_is_not_blamed_on_the_candidate():
    class Variant(FakeTarget):
        """Greedy output changes in a batch on both sides (an engine's own batch variance)."""

        def complete_batch(self, requests):
            out = super().complete_batch(requests)
            if len(requests) == 1:
                return out
            return [
                [Completion(c.text[:-1] + "x", (*c.token_ids[:-1], 0), c.finish_reason, c.logprobs) for c in o]
                if r.temperature == 0 and r.json_schema is None
                else o
                for r, o in zip(requests, out)
            ]

    result = probe_mixed_batches(Variant("baseline"), Variant("candidate"), SETTINGS)
    variant = [r for r in result.details["rows"] if r.get("stock_batch_variant")]
    assert variant and all(not r["equal_alone"] for r in variant)
    assert result.status == "passed", result.reason


class TopKOnly(FakeTarget):
    """A side that, like an HTTP server, returns no full next-token distributions."""

    def next_token_logprobs(self, token_ids):
        from fasttrack.probes.base import CapabilityMissing

        raise CapabilityMissing("top-k only")


class TopKOnlyFirstRowSampling(TopKOnly, FirstRowSampling):
    pass


def test_without_full_distributions_sampled_rows_are_tested_against_the_row_alone_on_stock():
    clean = probe_mixed_batches(TopKOnly("baseline"), TopKOnly("candidate", noise=1e-4), SETTINGS)
    assert clean.status == "passed", clean.reason
    assert {t["test"] for t in clean.details["tests"]} == {"two_sample_chi_square"}
    leaky = probe_mixed_batches(TopKOnly("baseline"), TopKOnlyFirstRowSampling("candidate"), SETTINGS)
    assert leaky.status == "failed"
    greedy_first = [t for t in leaky.details["tests"] if t["order"] == "greedy_first" and "p_value" in t]
    assert min(t["p_value"] for t in greedy_first) < leaky.details["per_test_alpha"]
