"""Token-coverage probe: every vocabulary id through both paths, finite and close to stock."""

from __future__ import annotations

import numpy as np

from fasttrack.probes.base import CapabilityMissing
from fasttrack.probes.fake import BAD_TOKEN_ID, VOCAB_SIZE, FakeTarget
from fasttrack.probes.token_coverage import TokenCoverageSettings, layout, probe_token_coverage


def test_layout_feeds_every_id_once_after_a_fixed_first_token():
    rows, real = layout(97, 16, first=5)
    fed = np.asarray([r[1:] for r in rows])[real]
    assert sorted(fed.tolist()) == list(range(97)) and all(r[0] == 5 and len(r) == 16 for r in rows)


def test_clean_candidate_passes_on_both_paths():
    result = probe_token_coverage(FakeTarget("baseline"), FakeTarget("candidate", noise=1e-4), TokenCoverageSettings())
    assert result.passed, result.reason
    for path in ("prefill", "decode"):
        assert (
            result.details["paths"][path]["ids"] == VOCAB_SIZE and result.details["paths"][path]["non_finite_ids"] == []
        )


def test_one_bad_token_id_is_named():
    bad = FakeTarget("candidate", faults=frozenset({"bad_token_id"}))
    result = probe_token_coverage(FakeTarget("baseline"), bad, TokenCoverageSettings(batch=3))
    assert result.status == "failed" and result.reason_code == "mismatch"
    assert f"non-finite logits after token id(s) {BAD_TOKEN_ID}" in result.reason
    assert result.details["paths"]["decode"]["non_finite_ids"] == [BAD_TOKEN_ID]


def test_a_large_shift_after_one_id_is_named_even_when_the_means_stay_small():
    class OneShifted(FakeTarget):
        def logits(self, token, position):
            row = super().logits(token, position)
            return row + (np.arange(VOCAB_SIZE) == 7) * 6.0 if token == 42 else row

    result = probe_token_coverage(FakeTarget("baseline"), OneShifted("candidate"), TokenCoverageSettings())
    assert result.status == "failed" and "KL above 0.1 after token id(s) 42" in result.reason
    assert "mean KL" not in result.reason  # one id in 97 does not move the mean past 0.01


def test_a_target_without_full_distributions_is_not_run():
    class TopKOnly(FakeTarget):
        def next_token_logprobs(self, token_ids):
            raise CapabilityMissing("an HTTP server")

    result = probe_token_coverage(TopKOnly("baseline"), TopKOnly("candidate"), TokenCoverageSettings())
    assert result.status == "not_run" and result.reason_code == "dependency"
