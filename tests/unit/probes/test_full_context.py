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
    assert drift.status == "failed" and "diverge at positions 192-" in drift.reason


def test_thin_top_k_is_underpowered_not_passed():
    class TopTwo(TopKOnly):
        listed = 2

    result = probe_full_context(TopTwo("baseline"), TopTwo("candidate"), FullContextSettings(max_context=256))
    assert result.status == "not_run" and result.reason_code == "underpowered" and "cover only" in result.reason
