"""Full-context probe: per-bucket divergence from full distributions or from top-k logprobs."""

from __future__ import annotations

import numpy as np
import pytest

from fasttrack.probes.base import CapabilityMissing
from fasttrack.probes.fake import FakeTarget, log_softmax
from fasttrack.probes.full_context import FullContextSettings, lumped_kl, position_kl, probe_full_context


class TopKOnly(FakeTarget):
    """A fake that, like an HTTP server, returns only the top-k of each teacher-forced distribution."""

    def next_token_logprobs(self, token_ids):
        raise CapabilityMissing("top-k only")

    listed = 60  # the fake's vocabulary is small and flat-ish: 60 of 97 tokens cover > 95 % of the mass

    def prompt_top_logprobs(self, token_ids, k=20):
        k = self.listed
        rows = FakeTarget.next_token_logprobs(self, token_ids)
        out = [None]
        for row in rows[:-1]:
            top = np.argsort(-row)[:k]
            out.append({int(t): float(row[t]) for t in top})
        return out


def test_lumped_kl_is_a_lower_bound_and_exact_with_everything_listed():
    rng = np.random.default_rng(0)
    p, q = log_softmax(rng.normal(size=30)), log_softmax(rng.normal(size=30))
    full = float(position_kl(p[None], q[None])[0])
    everything = lumped_kl(dict(enumerate(p)), dict(enumerate(q)))
    assert everything == pytest.approx(full, rel=1e-9)
    top5 = lumped_kl({i: p[i] for i in np.argsort(-p)[:5]}, {i: q[i] for i in np.argsort(-q)[:5]})
    assert 0.0 <= top5 <= full


def test_top_k_servers_get_a_lumped_kl_comparison():
    settings = FullContextSettings(max_context=256, buckets=(0, 64, 128, 192, 256))
    clean = probe_full_context(TopKOnly("baseline"), TopKOnly("candidate", noise=1e-4), settings)
    assert clean.passed, clean.reason
    assert clean.details["method"].startswith(
        "top-20 lumped KL"
    )  # what was asked; the fake lists more and clean.details["mean_residual_mass"] < 0.05
    drift = probe_full_context(
        TopKOnly("baseline"), TopKOnly("candidate", faults=frozenset({"far_position_drift"})), settings
    )
    assert drift.status == "failed" and "diverge at positions 2" in drift.reason  # the narrowest range: far out
    failing = [b for b in drift.details["buckets"] if not b["passed"]]
    assert failing and all(b["start"] >= 192 for b in failing)


def test_thin_top_k_is_underpowered_not_passed():
    class TopTwo(TopKOnly):
        listed = 2

    result = probe_full_context(TopTwo("baseline"), TopTwo("candidate"), FullContextSettings(max_context=256))
    assert result.status == "not_run" and result.reason_code == "underpowered" and "cover only" in result.reason


def test_a_divergence_right_after_an_edge_is_not_averaged_away_by_its_bucket():
    class AfterEdge(FakeTarget):
        def logits(self, token, position):
            row = super().logits(token, position)
            return row + 0.45 * np.sin(np.arange(len(row)) + position) if 128 <= position < 136 else row

    # KL ~0.05 at 8 positions: within the bucket of 128 (mean ~0.003, p99 < 0.1), not its first 8
    settings = FullContextSettings(max_context=256, buckets=(0, 128, 256), edge_window=8)
    result = probe_full_context(FakeTarget("baseline"), AfterEdge("candidate"), settings)
    assert result.status == "failed" and "positions 128-136 (after 128)" in result.reason
    assert all(b["passed"] for b in result.details["buckets"])


def test_the_last_position_of_the_context_is_scored_and_checked_alone():
    class LastSlot(FakeTarget):
        def logits(self, token, position):
            row = super().logits(token, position)
            return row + 1.4 * np.cos(np.arange(len(row))) if position == self.max_context - 1 else row

    settings = FullContextSettings(max_context=256, buckets=(0, 128, 256))
    result = probe_full_context(FakeTarget("baseline"), LastSlot("candidate"), settings)
    assert result.status == "failed" and "(last position)" in result.reason
    assert result.details["edge_windows"][-1]["start"] == 255 and all(b["passed"] for b in result.details["buckets"])


def test_requests_on_both_sides_of_every_context_bucket_edge():
    class CrashesAt(FakeTarget):
        def complete_batch(self, requests):
            for r in requests:
                if len(r.prompt) + r.max_tokens == 129:
                    raise __import__("fasttrack.probes.base", fromlist=["TargetFailure"]).TargetFailure("tile overflow")
            return super().complete_batch(requests)

    settings = FullContextSettings(max_context=256, context_buckets=(128, 256))
    assert __import__("fasttrack.probes.full_context", fromlist=["edge_lengths"]).edge_lengths(settings, 256) == [
        128,
        129,
    ]
    clean = probe_full_context(FakeTarget("baseline"), FakeTarget("candidate", noise=1e-4), settings)
    assert clean.passed, clean.reason
    assert [r["length"] for r in clean.details["edge_requests"]] == [128, 129]
    broken = probe_full_context(FakeTarget("baseline"), CrashesAt("candidate"), settings)
    assert broken.status == "failed" and "request of 129 tokens (a context-bucket edge)" in broken.reason


def test_a_server_without_logprobs_lacks_a_feature_it_did_not_crash():
    """#35 row 8: an answer with text but no token ids (a server that serves no logprobs) is named
    as a missing feature (the features kind records not_run(dependency)), not a crash at the
    maximum context."""
    from dataclasses import replace

    class NoLogprobs(FakeTarget):
        def complete_batch(self, requests):
            return [
                [replace(c, token_ids=(), logprobs=None) for c in outs] for outs in super().complete_batch(requests)
            ]

    with pytest.raises(CapabilityMissing, match="without token ids or logprobs"):
        probe_full_context(FakeTarget("baseline"), NoLogprobs("candidate"), FullContextSettings(max_context=256))
