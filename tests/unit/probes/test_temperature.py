"""The temperature probe's statistics: calibrated under the null, sharp against a wrong temperature."""

from __future__ import annotations

import numpy as np
import pytest

from fasttrack.probes.base import CapabilityMissing
from fasttrack.probes.fake import FakeTarget, sampling_distribution
from fasttrack.probes.temperature import TemperatureSettings, expected_distribution, goodness_of_fit, probe_temperature


def counts_from(rng, probs, n):
    drawn = rng.multinomial(n, probs)
    return {int(t): int(c) for t, c in enumerate(drawn) if c}


def test_goodness_of_fit_false_alarm_rate_is_near_alpha():
    rng = np.random.default_rng(0)
    probs = expected_distribution(rng.normal(size=50) * 2.0, 0.8, 1.0)
    p_values = [goodness_of_fit(counts_from(rng, probs, 300), probs)[1] for _ in range(400)]
    rate = np.mean(np.asarray(p_values) < 0.05)
    assert 0.01 <= rate <= 0.09  # binomial(400, 0.05) range, generously


def test_goodness_of_fit_detects_an_ignored_temperature():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=50) * 2.0
    drawn_at_1 = counts_from(rng, expected_distribution(logits, 1.0, 1.0), 300)
    _, p_value, categories = goodness_of_fit(drawn_at_1, expected_distribution(logits, 0.7, 1.0))
    assert p_value < 1e-4 and categories >= 2


def test_rare_tokens_are_pooled_so_every_expected_count_is_at_least_5():
    probs = np.array([0.9, 0.05, 0.03, 0.01, 0.01])
    _statistic, p_value, categories = goodness_of_fit({0: 90, 1: 5, 2: 3, 3: 1, 4: 1}, probs)
    assert categories == 3  # expected 90 and 5 kept; tokens 2-4 (expected 3 + 1 + 1) pooled into one category
    assert p_value > 0.5


def test_expected_distribution_matches_the_reference_sampler():
    logits = np.random.default_rng(2).normal(size=30) * 3
    for t, p in [(0.7, 1.0), (1.3, 0.9), (1.0, 0.5)]:
        np.testing.assert_allclose(expected_distribution(logits, t, p), sampling_distribution(logits, t, p), atol=1e-12)


def test_two_sample_fallback_when_baseline_returns_only_top_k():
    class TopKOnly(FakeTarget):
        def next_token_logprobs(self, token_ids):
            raise CapabilityMissing("top-k only")

    settings = TemperatureSettings(
        temperatures=(0.6,), top_p=(1.0,), samples=400, prompts=("The weather today is",), positions=2
    )
    clean = probe_temperature(TopKOnly("baseline"), FakeTarget("candidate"), settings)
    assert clean.passed and "two-sample" in clean.details["method"]
    broken = probe_temperature(
        TopKOnly("baseline"), FakeTarget("candidate", faults=frozenset({"temperature_ignored"})), settings
    )
    assert broken.status == "failed" and "T=0.6" in broken.reason


def test_bonferroni_threshold_covers_every_test():
    settings = TemperatureSettings(
        temperatures=(0.7, 1.3), top_p=(1.0,), samples=200, prompts=("Once upon a time, there was a",), positions=2
    )
    result = probe_temperature(FakeTarget("baseline"), FakeTarget("candidate", noise=1e-3), settings)
    assert result.passed
    assert len(result.details["tests"]) == 2 * (2 + 1)  # temperatures x (positions + score test)
    assert result.details["per_test_alpha"] == pytest.approx(settings.alpha / 6)
    scored = [t["p_value"] for t in result.details["tests"] if "p_value" in t]
    assert result.p_value == pytest.approx(min(1.0, min(scored) * 6))


def test_too_few_samples_is_underpowered_not_passed():
    settings = TemperatureSettings(
        temperatures=(0.9,), top_p=(1.0,), samples=20, prompts=("The weather today is",), positions=1
    )
    result = probe_temperature(
        FakeTarget("baseline"), FakeTarget("candidate", faults=frozenset({"temperature_ignored"})), settings
    )
    assert result.status == "not_run" and result.reason_code == "underpowered"
    assert result.details["power_if_temperature_ignored"] < 0.8


def test_score_test_sees_an_ignored_temperature_where_tokens_are_too_many_for_chi_square():
    from fasttrack.probes.temperature import score_test

    rng = np.random.default_rng(3)
    logits = rng.normal(size=200) * 0.6  # flat: 300 samples over 200 tokens
    logp = logits - np.log(np.exp(logits).sum())
    drawn = rng.choice(200, size=3000, p=expected_distribution(logp, 1.0, 1.0))
    ignored = score_test(logp, drawn, 0.5, 1.0)
    assert ignored["p_value"] < 1e-6 and ignored["statistic"] < 0  # flatter than T=0.5 predicts
    right = score_test(logp, rng.choice(200, size=3000, p=expected_distribution(logp, 0.5, 1.0)), 0.5, 1.0)
    assert right["p_value"] > 0.001


def exact_pearson_tail(counts: np.ndarray, probs: np.ndarray) -> float:
    """P(X^2 >= observed) by enumerating every multinomial outcome (small n, 3 categories)."""
    from scipy.stats import multinomial

    n = int(counts.sum())
    observed = float(((counts - n * probs) ** 2 / (n * probs)).sum())
    tail = 0.0
    for a in range(n + 1):
        for b in range(n + 1 - a):
            c = np.array([a, b, n - a - b])
            if ((c - n * probs) ** 2 / (n * probs)).sum() >= observed - 1e-9:
                tail += multinomial.pmf(c, n, probs)
    return tail


def test_monte_carlo_chi_square_matches_the_exact_multinomial_tail_where_the_approximation_does_not():
    from fasttrack.probes.sampling_stats import PooledGroup, chi_square, chi_square_monte_carlo

    probs = np.array([0.8, 0.15, 0.05])
    counts = np.array([14.0, 1.0, 5.0])  # n = 20: expected counts 16, 3, 1
    exact = exact_pearson_tail(counts, probs)
    _stat, asymptotic, _df = chi_square([PooledGroup(counts, probs)])
    p, resamples = chi_square_monte_carlo([PooledGroup(counts, probs)], 1e-3, np.random.default_rng(0))
    se = np.sqrt(exact * (1 - exact) / resamples)
    assert abs(p - exact) < 4 * se + 2 / resamples
    assert asymptotic < exact / 2  # the chi-square approximation is anti-conservative in this tail


def test_monte_carlo_score_test_is_exact_in_the_skewed_tail():
    from fasttrack.probes.sampling_stats import ScoreNull, score_monte_carlo

    rng = np.random.default_rng(5)
    q = np.array([0.97, 0.02, 0.01])
    logp = np.log(np.array([0.9, 0.05, 0.05]))
    null = ScoreNull(logp, q)
    tokens = [0] * 36 + [2] * 4  # n = 40: 4 draws of a 1 % token
    # exact: the sum depends on the counts of tokens 1 and 2 only; enumerate them
    from scipy.stats import multinomial

    total = logp[tokens].sum()
    mean = null.mean * 40
    values = {(a, b): multinomial.pmf([40 - a - b, a, b], 40, q) for a in range(41) for b in range(41 - a)}
    sums = {(a, b): (40 - a - b) * logp[0] + a * logp[1] + b * logp[2] for a, b in values}
    lower = sum(p for k, p in values.items() if sums[k] <= total + 1e-9)
    upper = sum(p for k, p in values.items() if sums[k] >= total - 1e-9)
    exact = min(1.0, 2 * min(lower, upper))
    p, resamples = score_monte_carlo(null, tokens, 1e-4, rng)
    assert abs(p - exact) < 4 * np.sqrt(exact / resamples) + 4 / resamples
    assert total < mean


def test_only_small_p_values_are_refined_and_refinement_stops_at_the_first_failure():
    from fasttrack.probes.temperature import refine_small_p_values

    calls = []

    def refiner(p):
        def refine(threshold):
            calls.append(p)
            return p, 999

        return refine

    entries = [{"p_value": v} for v in (0.5, 0.004, 1e-6, 2e-5)]
    refine_small_p_values([(e, refiner(e["p_value"])) for e in entries], threshold=1e-4)
    assert calls == [1e-6]  # smallest first; it fails, so 2e-5 and 0.004 are not refined
    assert entries[2]["p_method"].startswith("Monte Carlo") and "p_value" not in entries[3]
    assert entries[3]["p_asymptotic"] == 2e-5 and "p_value" not in entries[1]
    assert entries[0]["p_value"] == 0.5 and "p_method" not in entries[0]  # above the screen: untouched


def test_the_issue_seeds_on_the_fake_are_refined_and_the_clean_probe_passes():
    settings = TemperatureSettings(temperatures=(0.7, 1.3), top_p=(1.0, 0.9), samples=300, seed=55)
    result = probe_temperature(FakeTarget("baseline"), FakeTarget("candidate", noise=1e-4), settings)
    assert result.passed, result.reason
    for t in result.details["tests"]:
        assert t.get("p_method") in (None, "asymptotic chi-square", "asymptotic normal") or t["p_method"].startswith(
            "Monte Carlo"
        )
