"""fasttrack.stats against scipy / statsmodels, textbook cases and simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from fasttrack import stats as S

statsmodels = pytest.importorskip("statsmodels")  # test-only dependency
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.power import TTestPower

MARGIN, ALPHA = 0.05, 0.05


def _paired_binary(rng, sims, n, r2w, w2r, p_base=0.7):
    """Simulated 0/1 paired scores: P(right→wrong)=r2w, P(wrong→right)=w2r (as shares of all items)."""
    u = rng.random((sims, n))
    d = np.where(u < r2w, -1.0, np.where(u < r2w + w2r, 1.0, 0.0))
    base = np.where(d == -1, 1.0, np.where(d == 1, 0.0, (rng.random((sims, n)) < p_base) * 1.0))
    return base, base + d


# --- textbook and library cross-checks ---------------------------------------------------------


@pytest.mark.parametrize(
    "b, c, expected",
    [(0, 5, 2 * 0.5**5), (1, 9, 2 * (1 + 10) / 2**10), (5, 5, 1.0), (0, 0, 1.0)],
)
def test_mcnemar_exact_textbook_values(b, c, expected):
    assert S.mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("b, c", [(150, 86), (12, 3), (7, 21), (40, 41)])
def test_mcnemar_exact_matches_statsmodels(b, c):
    table = [[100, b], [c, 50]]
    assert S.mcnemar_exact(b, c) == pytest.approx(sm_mcnemar(table, exact=True).pvalue, rel=1e-9)


def test_paired_interval_equals_scipy_ttest_rel():
    rng = np.random.default_rng(3)
    base = rng.random(57)
    cand = np.clip(base + rng.normal(-0.01, 0.05, 57), 0, 1)
    pc = S.paired_comparison(base, cand, margin=MARGIN, alpha=ALPHA, skew_correction=False)
    two = st.ttest_rel(cand, base).confidence_interval(1 - ALPHA)
    one = st.ttest_rel(cand, base, alternative="greater").confidence_interval(1 - ALPHA)
    upper = st.ttest_rel(cand, base, alternative="less").confidence_interval(1 - ALPHA)
    assert (pc.ci_low, pc.ci_high) == pytest.approx((two.low, two.high), rel=1e-10)
    assert pc.lower_bound == pytest.approx(one.low, rel=1e-10)
    assert pc.upper_bound == pytest.approx(upper.high, rel=1e-10)
    assert pc.diff == pytest.approx(np.mean(cand - base))
    # paired SE = sqrt((Var a + Var b - 2 Cov)/n)
    cov = np.cov(base, cand, ddof=1)
    assert pc.se == pytest.approx(math.sqrt((cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]) / 57))
    # unpaired SE as Welch's t-test uses it
    welch = st.ttest_ind(cand, base, equal_var=False)
    assert pc.diff / pc.unpaired_se == pytest.approx(welch.statistic)
    assert pc.unpaired_se > pc.se  # positively correlated sides: pairing helps


def test_skew_correction_is_hall_transform_and_vanishes_for_symmetric_data():
    for a in (-0.05, -0.01, 0.0, 0.02):
        for y in (-2.0, -1.0, 0.5, 1.7):
            t = S.hall_inverse(y, a)
            assert t + a * (1 + 2 * t**2) + 4 / 3 * a**2 * t**3 == pytest.approx(y, abs=1e-12)
    d = np.r_[np.ones(10), -np.ones(10), np.zeros(80)]  # symmetric: the same bounds as ttest_rel
    base = np.full(100, 0.5)
    pc = S.paired_comparison(base, base + d * 0.5, margin=MARGIN)
    ref = st.ttest_rel(base + d * 0.5, base, alternative="greater").confidence_interval(1 - ALPHA)
    assert pc.lower_bound == pytest.approx(ref.low, rel=1e-10)


def test_skew_correction_keeps_false_pass_at_the_margin_near_alpha():
    # one-sided flips (7.5% right→wrong, 2.5% wrong→right; true drop = margin) skew the
    # differences; the plain t bound passes too often, Hall's corrected bound does not
    rng = np.random.default_rng(12)
    base, cand = _paired_binary(rng, 2000, 200, 0.075, 0.025)
    corrected = np.mean([S.paired_comparison(b, c, margin=MARGIN).lower_bound > -MARGIN for b, c in zip(base, cand)])
    plain = np.mean(
        [
            S.paired_comparison(b, c, margin=MARGIN, skew_correction=False).lower_bound > -MARGIN
            for b, c in zip(base, cand)
        ]
    )
    assert corrected <= ALPHA + 0.01
    assert plain > corrected


def test_required_n_close_to_statsmodels_noncentral_t_power():
    for var in (0.04, 0.1, 0.25):
        exact = TTestPower().solve_power(
            effect_size=MARGIN / math.sqrt(var), alpha=ALPHA, power=0.8, alternative="larger"
        )
        assert abs(S.required_n(var, MARGIN, ALPHA) - exact) <= 2


def test_flips_and_mcnemar_only_for_binary_metrics():
    base = np.array([1, 1, 1, 0, 0, 1, 0, 1.0])
    cand = np.array([0, 1, 0, 1, 0, 1, 0, 0.0])
    pc = S.paired_comparison(base, cand, margin=0.1)
    assert (pc.flips.right_to_wrong, pc.flips.wrong_to_right) == (3, 1)
    assert pc.flips.p_mcnemar == pytest.approx(st.binomtest(3, 4, 0.5).pvalue)
    ratio = S.paired_comparison(base * 0.5, cand * 0.7, margin=0.1)
    assert ratio.flips is None and ratio.to_dict()["p_mcnemar"] is None


def test_cluster_by_item_averages_repeats():
    out = S.cluster_by_item(["a", "b", "a", "a", "b"], [1, 0, 0, 1, 1])
    assert out == {"a": pytest.approx(2 / 3), "b": 0.5}


# --- decisions --------------------------------------------------------------------------------


def test_small_run_is_underpowered_with_needed_n():
    pc = S.paired_comparison([1, 0, 1, 1, 0, 1], [1, 0, 1, 1, 0, 1], margin=MARGIN)
    assert pc.decision.status == "not_run" and pc.decision.reason_code == "underpowered"
    assert f"need n ≥ {pc.n_needed}" in pc.decision.reason
    assert pc.n_needed == S.required_n(MARGIN * (1 - MARGIN), MARGIN, ALPHA)


def test_identical_sides_pass_once_n_is_enough():
    rng = np.random.default_rng(0)
    base = (rng.random(400) < 0.6) * 1.0
    pc = S.paired_comparison(base, base.copy(), margin=MARGIN)
    assert pc.status == "passed" and pc.diff == 0 and pc.lower_bound == 0


def test_clear_regression_fails_even_when_underpowered():
    base = np.ones(30)
    cand = np.r_[np.zeros(15), np.ones(15)]
    pc = S.paired_comparison(base, cand, margin=MARGIN)
    assert pc.n < pc.n_needed and pc.status == "failed" and pc.decision.reason_code == "regression"


def test_baseline_at_floor_is_flagged_and_never_passes():
    pc = S.paired_comparison(np.zeros(500), np.zeros(500), margin=MARGIN)
    assert pc.at_floor and pc.status == "not_run" and pc.decision.reason_code == "floor"


def test_regression_confined_to_one_bin_fails_that_bin_and_the_whole():
    rng = np.random.default_rng(7)
    n = 600
    base = (rng.random(n) < 0.8) * 1.0
    bins = np.array(["short", "mid", "long"] * (n // 3))
    cand = base.copy()
    long_ = bins == "long"
    cand[long_] = np.where(rng.random(long_.sum()) < 0.5, 0.0, cand[long_])
    per_bin = S.compare_bins(base, cand, bins, margin=MARGIN, order=["short", "mid", "long"])
    assert per_bin["short"].status == "passed" and per_bin["mid"].status == "passed"
    assert per_bin["long"].status == "failed"
    overall = S.paired_comparison(base, cand, margin=MARGIN)
    assert S.combine([overall.decision, *(c.decision for c in per_bin.values())]).status == "failed"


def test_bins_by_edges():
    assert S.bins_by_edges([0, 1023, 1024, 5000], [0, 1024, 4096]) == ["0-1024", "0-1024", "1024-4096", ">=4096"]


# --- simulation: error rates and power ------------------------------------------------------


def test_fixed_n_false_fail_and_power_at_recommended_n():
    rng = np.random.default_rng(20261202)
    sims = 1000
    # no true difference: 4% of items flip each way
    n0 = S.required_n(S.planning_variance(0.08, MARGIN), MARGIN, ALPHA)
    base, cand = _paired_binary(rng, sims, n0, 0.04, 0.04)
    null_status = [S.paired_comparison(b, c, margin=MARGIN, alpha=ALPHA).status for b, c in zip(base, cand)]
    assert null_status.count("failed") / sims <= ALPHA + 0.01
    # a true drop of twice the margin: 12% right→wrong, 2% wrong→right; n recommended for its variance
    var = 0.14 - 0.1**2
    n1 = S.required_n(S.planning_variance(var, MARGIN), MARGIN, ALPHA)
    base, cand = _paired_binary(rng, sims, n1, 0.12, 0.02)
    drop_status = [S.paired_comparison(b, c, margin=MARGIN, alpha=ALPHA).status for b, c in zip(base, cand)]
    assert drop_status.count("failed") / sims >= 0.8
    assert drop_status.count("passed") == 0


def test_fixed_n_false_pass_at_the_margin_is_at_most_alpha():
    rng = np.random.default_rng(11)
    base, cand = _paired_binary(rng, 1000, 300, 0.075, 0.025)  # true mean d = -margin
    passed = sum(S.paired_comparison(b, c, margin=MARGIN).status == "passed" for b, c in zip(base, cand))
    assert passed / 1000 <= ALPHA + 0.01


def test_confidence_sequence_is_anytime_valid():
    rng = np.random.default_rng(5)
    base, cand = _paired_binary(rng, 2000, 400, 0.06, 0.02)  # mean d = -0.04
    above, below = S.rejects(cand - base, -0.04, ALPHA)
    # ever rejecting the true mean, at any of the 400 looks, happens at most α of the time per side
    assert above[:, -1].mean() <= ALPHA + 0.01
    assert below[:, -1].mean() <= ALPHA + 0.01


def test_sequential_rule_error_rates_and_savings():
    rng = np.random.default_rng(8)
    looks = list(range(25, 301, 25))
    base, cand = _paired_binary(rng, 2000, 300, 0.075, 0.025)  # at the margin: must not pass
    code, _ = S.sequential_stop_times(cand - base, margin=MARGIN, alpha=ALPHA, looks=looks)
    assert (code == 1).mean() <= ALPHA + 0.01
    base, cand = _paired_binary(rng, 2000, 300, 0.02, 0.02)  # clean: must not fail, should stop early
    code, used = S.sequential_stop_times(cand - base, margin=MARGIN, alpha=ALPHA, looks=looks)
    assert (code == -1).mean() <= ALPHA + 0.01
    assert (code == 1).mean() >= 0.8
    assert used.mean() <= 0.7 * 300
    # a drop of twice the margin: the confidence sequence is wider than the fixed-n interval, so the
    # sequential rule needs a larger maximum (2.5x the fixed-n recommendation) for the same power,
    # while its average sample size stays close to the fixed n
    n_fixed = S.required_n(0.13, MARGIN, ALPHA)
    n_max = int(2.5 * n_fixed)
    base, cand = _paired_binary(rng, 2000, n_max, 0.12, 0.02)
    code, used = S.sequential_stop_times(cand - base, margin=MARGIN, alpha=ALPHA, looks=range(25, n_max + 1, 25))
    assert (code == -1).mean() >= 0.8 and (code == 1).mean() <= ALPHA
    assert used.mean() <= 1.5 * n_fixed


def test_sequential_decision_matches_vectorised_rule_and_cs():
    rng = np.random.default_rng(9)
    looks = list(range(25, 301, 25))
    base, cand = _paired_binary(rng, 20, 300, 0.02, 0.02)
    d = cand - base
    code, used = S.sequential_stop_times(d, margin=MARGIN, alpha=ALPHA, looks=looks)
    for i in range(20):
        r = S.sequential_decision(d[i], margin=MARGIN, alpha=ALPHA, looks=looks)
        assert {1: "passed", -1: "failed", 0: "inconclusive"}[code[i]] == r.decision
        assert r.n_used == used[i]
        if r.decision == "passed":
            assert r.lower > -MARGIN and r.stopped_early == (r.n_used < 300)
    cs = S.confidence_sequence(d[0], ALPHA)
    assert np.all(np.diff(cs.lower) >= 0) and np.all(np.diff(cs.upper) <= 0)
    assert np.all(cs.lower <= cs.upper)


def test_sequential_without_verdict_is_inconclusive_not_a_fixed_n_fallback():
    d = np.r_[np.zeros(40), -np.ones(2)]
    r = S.sequential_decision(d, margin=MARGIN, alpha=ALPHA, looks=[20, 42], n_max=42)
    assert r.decision == "inconclusive" and not r.stopped_early
    dec = S.decision_from_sequential(r, 120, MARGIN)
    assert dec.status == "not_run" and dec.reason_code == "underpowered"


def test_sequential_passes_identical_outputs_soon_after_the_exact_bound():
    # all-zero differences are also what a candidate losing a whole point on a share Δ of items
    # shows with probability (1-Δ)^n: no valid test passes them before (1-Δ)^n ≤ α (n = 59 here);
    # the betting sequence should not need many more (a per-bin share of the example's items)
    exact = math.ceil(math.log(ALPHA) / math.log(1 - MARGIN))
    above, below = S.rejects(np.zeros(200), -MARGIN, ALPHA)
    first = int(np.argmax(above)) + 1
    assert above.any() and not below.any()
    assert exact <= first <= 75


def test_cycles_over_bins_reject_only_at_cycle_ends_and_keep_their_level():
    # equal outputs: the test bets in whole cycles of three bins and passes at a cycle's end
    above, _ = S.rejects(np.zeros(240), -0.05, 0.05, block=3)
    first = int(np.argmax(above)) + 1
    assert first % 3 == 0 and 71 <= first <= 90
    # a null at the margin made of unequal bins (-0.15, 0, 0: mean -0.05), items taken in turn
    rng = np.random.default_rng(7)
    sims, cycles = 2000, 80
    drops = np.stack([(rng.random((sims, cycles)) < p) * -1.0 for p in (0.15, 0.0, 0.0)], axis=2)
    d = drops.reshape(sims, cycles * 3)
    passed, _ = S.rejects(d, -0.05, 0.05, block=3)
    assert passed[:, -1].mean() <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / sims)
    changes = np.flatnonzero(np.diff(passed.astype(int), axis=1).any(axis=0)) + 1
    assert all(t % 3 == 2 for t in changes)  # index t is item t + 1: only cycle ends


def test_items_to_settle_is_where_the_sequential_rule_settles():
    """An underpowered eval's "needs n" comes from the rule the gate applies: for identical outputs
    the betting sequence passes at the look the estimate names and not at the look before."""
    from fasttrack.stats import items_to_settle, sequential_decision

    needed = items_to_settle([0.0] * 8, margin=0.05, alpha=0.05, batch=8)
    assert needed is not None and needed % 8 == 0
    looks = list(range(8, needed + 1, 8))
    assert sequential_decision([0.0] * needed, margin=0.05, alpha=0.05, looks=looks).decision == "passed"
    before = sequential_decision([0.0] * (needed - 8), margin=0.05, alpha=0.05, looks=looks[:-1])
    assert before.decision == "inconclusive"
    # A clear regression (one item in eight lost) never settles as a pass.
    assert items_to_settle([0.0] * 7 + [-1.0], margin=0.05, alpha=0.05, batch=8) is None
    # Noise costs items: one flip each way needs more than identical outputs.
    noisy = items_to_settle([0.0] * 6 + [-1.0, 1.0], margin=0.05, alpha=0.05, batch=8)
    assert noisy is not None and noisy > needed
