"""The speed statistics and the promised-speed-up rule (``expect``) of the benchmark runner."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from fasttrack.evidence import Status
from fasttrack.kinds.benchmarks import run as bench_run
from fasttrack.kinds.benchmarks import speed
from fasttrack.kinds.benchmarks.run import SpeedSpec, time_point
from fasttrack.kinds.context import RunContext
from fasttrack.manifest import ScopePoint, load_manifest
from fasttrack.manifest.sections import SpeedPromise, thaw
from fasttrack.plan import CheckInstance

FAKE_MANIFEST = Path(__file__).resolve().parents[1] / "probes" / "fake_manifest.yaml"


def test_sign_bounds_are_the_binomial_order_statistics():
    rng = np.random.default_rng(3)
    for n in (6, 10, 17, 40):
        r = rng.lognormal(0.0, 0.2, size=n)
        lo, hi = speed.sign_bounds(r, 0.025)
        k = next(k for k in range(1, n + 1) if stats.binom.sf(k - 1, n, 0.5) <= 0.025)
        assert hi == np.sort(r)[k - 1] and lo == np.sort(r)[n - k]
    assert speed.sign_bounds([1.0] * 5, 0.025) == (-math.inf, math.inf)
    assert speed.min_pairs(0.025) == 6 and speed.min_pairs(0.001) == 10


def test_sequential_decides_when_the_pairs_fall_clearly_on_one_side():
    rng = np.random.default_rng(0)
    r = np.exp(rng.normal(np.log(3.35), 0.1, size=30))
    clean = speed.sequential(r, 2.5, 0.001)
    assert clean.decision == speed.PASS and clean.decided_at <= 15 and clean.lower > 2.5
    broken = speed.sequential(r * 0.6, 2.5, 0.001)  # 2.0x where 2.5x was promised
    assert broken.decision == speed.FAIL and broken.decided_at <= 15 and broken.upper < 2.5
    at_promise = speed.sequential(r, 3.35, 0.001)
    assert at_promise.decision == speed.OPEN and at_promise.lower < 3.35 < at_promise.upper


def test_sequential_errors_stay_below_alpha_at_every_look():
    """At a true median equal to the promise, looking after every pair up to 40 pairs: the chance of
    ever passing (or ever failing) stays at most alpha, whatever the noise's shape."""
    rng = np.random.default_rng(11)
    sims, alpha = 2000, 0.05
    noise = np.concatenate([rng.standard_t(2, size=(sims // 2, 40)), rng.lognormal(0, 1, size=(sims // 2, 40))])
    medians = np.concatenate([np.zeros(sims // 2), np.full(sims // 2, 1.0)])  # t: median 0; lognormal(0, 1): 1
    ratios = 2.0 * np.exp(noise - medians[:, None])  # median exactly 2.0
    above, below = speed.rejects((ratios > 2.0).astype(float), 0.5, alpha, lo=0.0, hi=1.0)
    passed, failed = above.any(axis=1).mean(), below.any(axis=1).mean()
    # Clopper-Pearson upper bounds of the observed rates stay within alpha
    assert stats.binomtest(int(passed * sims), sims).proportion_ci().high <= alpha + 0.01
    assert stats.binomtest(int(failed * sims), sims).proportion_ci().high <= alpha + 0.01


def test_pairs_needed_grows_as_the_share_nears_one_half():
    assert speed.pairs_needed(10, 10, 0.001) < speed.pairs_needed(8, 10, 0.001) < speed.pairs_needed(6, 10, 0.001)
    assert speed.pairs_needed(5, 10, 0.001) is None


class Scripted:
    """Sides whose rate comes from a script: the timing loop's logic without a target."""

    def __init__(self, base: list[float], cand: list[float]):
        self.rates = {"baseline": iter(base), "candidate": iter(cand)}

    def rate(self, target: object) -> float:
        return next(self.rates[str(target)])

    sides = {"baseline": "baseline", "candidate": "candidate"}


def scripted(ratios: list[float]) -> Scripted:
    # warm-up runs first (1.0 each), then one rate per side per pair
    return Scripted([1.0] + [1.0] * len(ratios), [1.0] + list(ratios))


def test_time_point_keeps_timing_until_the_promise_is_decided():
    script = scripted([3.3] * 40)
    spec = SpeedSpec(alpha=0.001, promises=(SpeedPromise(2.5),), max_pairs=40)
    comparison, decision = time_point(script.rate, script.sides, spec, SpeedPromise(2.5), True, lambda: 1e9)
    assert decision.status is Status.PASSED and 10 <= len(comparison.ratios) <= 15
    assert comparison.ratio_ci[0] > 2.5 and decision.rule == "promised speed-up"


def test_time_point_undecided_at_the_cap_says_how_many_pairs_would_decide():
    script = scripted(list(itertools.islice(itertools.cycle([2.0, 3.0]), 40)))
    spec = SpeedSpec(alpha=0.001, max_pairs=12)
    comparison, decision = time_point(script.rate, script.sides, spec, SpeedPromise(2.5), True, lambda: 1e9)
    assert decision.status is Status.NOT_RUN and decision.reason_code == "underpowered"
    assert len(comparison.ratios) == 12 and "max_pairs 12" in decision.reason
    assert "no number of pairs decides" in decision.reason  # half the pairs above: the promise is the median


def test_time_point_stops_before_the_time_limit():
    script = scripted([2.6, 2.4] * 20)
    left = iter([100.0] * 3 + [0.0] * 100)
    spec = SpeedSpec(alpha=0.001, max_pairs=40)
    comparison, decision = time_point(script.rate, script.sides, spec, SpeedPromise(2.5), True, lambda: next(left))
    assert decision.status is Status.NOT_RUN and "time limit" in decision.reason and len(comparison.ratios) == 13


def run_point(tmp_path: Path, batch: int, expect: str, alpha: str = "0.01") -> list:
    text = FAKE_MANIFEST.read_text().replace(
        "    repeats: 5\n", f"    repeats: 5\n    alpha: {alpha}\n    max_pairs: 16\n    expect: {expect}\n"
    )
    # a candidate 3x as fast per step: far from both promises below, whatever the machine's load
    text = text.replace("step_delay_s: 0.005}", "step_delay_s: 0.005, candidate_speed: 0.3}")
    path = tmp_path / "fasttrack.yaml"
    path.write_text(text)
    manifest = load_manifest(path)
    bench = manifest.benchmarks[0]
    point = ScopePoint.of({"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1, "batch": batch})
    instance = CheckInstance(
        f"benchmarks/{bench.id}@{point.id}",
        "benchmarks",
        bench.id,
        point,
        True,
        True,
        None,
        None,
        None,
        1.0,
        60.0,
        thaw(bench.raw),
    )
    return bench_run.run(instance, RunContext(manifest, None, tmp_path, tmp_path / "artifacts", 60.0))


def test_a_kept_promise_passes_and_a_broken_one_fails_on_the_fake(tmp_path):
    # The candidate sleeps 0.3x as long per step: a speed-up of about 2-3x at batch 8.
    (kept, *_) = run_point(tmp_path, 8, "[{min_speedup: 1.02, points: {batch: [8]}}]")
    assert kept.status is Status.PASSED, kept.reason
    assert kept.measurements["promise"] == 1.02 and kept.measurements["ratio_ci"][0] > 1.02
    (broken, *_) = run_point(tmp_path, 8, "{min_speedup: 8.0}")
    assert broken.status is Status.FAILED and broken.reason_code == "regression"
    assert "below the promised 8x" in broken.reason and broken.measurements["ratio_ci"][1] < 8.0
    # a point outside every promise's region keeps "not slower than stock"
    (elsewhere, *_) = run_point(tmp_path, 1, "[{min_speedup: 3.0, points: {batch: [8]}}]")
    assert elsewhere.measurements["rule"] == "not slower than stock" and elsewhere.measurements["promise"] is None


@pytest.mark.parametrize(
    ("expect", "message"),
    [
        ("{min_speedup: 2, points: {batch: [7]}}", "none of the benchmark's points"),
        ("{min_speedup: 2, points: {batch: [65]}}", "outside scope.batch"),
        ("{min_speedup: 2, points: {dtype: [fp8]}}", "not declared in the scope"),
        ("{min_speedup: 0}", "expect.min_speedup: 0 is less than or equal to the minimum of 0"),
    ],
)
def test_bad_promises_are_manifest_errors(tmp_path, expect, message):
    from fasttrack.errors import ManifestError

    text = FAKE_MANIFEST.read_text().replace("    repeats: 5\n", f"    repeats: 5\n    expect: {expect}\n")
    path = tmp_path / "fasttrack.yaml"
    path.write_text(text)
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    assert message in err.value.user_message()
