"""How often the gate fails clean code: every rule that can fail by chance, on clean pairs.

A clean pair is the same path on both sides (fasttrack's fake target, `fasttrack/probes/fake.py`,
with the candidate's numerical noise drawn afresh per seed) or the example's real candidate at
fp32. For each check the script runs the check's own code over many seeds and prints the
false-fail rate with its exact 95 % Clopper-Pearson interval (scipy) next to the check's nominal
rate: its alpha for statistical rules (the interval's upper bound must stay within 2 x alpha), 0
for deterministic ones (a threshold on exact values: clean code must never cross it). Then it
runs real clean runs of the example's feature probes (the example's manifest settings, only the
seeds differ) and ends with one line ``false alarms: F of N clean runs``.

    python benchmarks/false_alarms.py                      # every check, 200+ seeds each, and 4 real runs
    python benchmarks/false_alarms.py --only temperature,speed --seeds 400 --workers 2
    python benchmarks/false_alarms.py --only round3 --seeds 200 --workers 2   # mixed batches, acceptance vs stock
    python benchmarks/false_alarms.py --only real --real-runs 24 --workers 16 --results runs.jsonl
    python benchmarks/false_alarms.py --only real --from runs.jsonl device/runs.jsonl   # summarise

Real runs are CPU-heavy (~150 CPU-s each on this host): ``--workers`` runs them in parallel
processes (one torch thread each), ``--results`` appends one JSON line per finished run, and
``--from`` summarises result files from several machines without running anything.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "examples" / "mini-k3")]
MANIFEST = REPO / "examples" / "mini-k3" / "fasttrack.yaml"
H200_EVIDENCE = REPO / "benchmarks" / "results" / "h200-benchmarks.evidence.json"


# ---------------------------------------------------------------------------------------------
# One clean trial per seed for each check: True when the check failed clean code


def temperature_trial(seed: int, alpha: float = 0.05, two_sample: bool = False) -> dict[str, Any]:
    """The temperature probe with the example's settings, both sides the fake's stock path."""
    from fasttrack.probes.base import CapabilityMissing
    from fasttrack.probes.fake import FakeTarget
    from fasttrack.probes.temperature import TemperatureSettings, probe_temperature

    class TopKOnly(FakeTarget):
        def next_token_logprobs(self, token_ids: Sequence[int]) -> np.ndarray:
            raise CapabilityMissing("an HTTP server: top-k only")

    settings = TemperatureSettings(temperatures=(0.7, 1.0, 1.3), top_p=(1.0, 0.9), samples=400, alpha=alpha, seed=seed)
    baseline = TopKOnly("baseline") if two_sample else FakeTarget("baseline")
    result = probe_temperature(baseline, FakeTarget("candidate"), settings)
    scored = [t["p_value"] for t in result.details.get("tests", ()) if "p_value" in t]
    return {"failed": result.status == "failed", "status": result.status, "min_p": min(scored, default=1.0)}


def divergence_trial(seed: int, noise: float) -> dict[str, Any]:
    """Teacher-forced KL and top-1 agreement per bucket, the example's thresholds, a candidate whose
    logits differ by seeded noise of size ``noise`` (1e-4: fp32 reordering; 0.005: bf16-like)."""
    from fasttrack.kinds.divergence.run import run_divergence
    from fasttrack.probes.content import prompts
    from fasttrack.probes.fake import FakeTarget

    rng = np.random.default_rng(seed)
    filler = prompts()["filler"] * 4
    texts = [filler[o : o + 250] for o in rng.integers(0, len(filler) - 260, size=2)]
    cfg = {"buckets": [0, 64, 128, 192, 256], "max_mean_kl": 0.01, "max_p99_kl": 0.1, "min_top1_agreement": 0.98}
    base, cand = FakeTarget("baseline"), FakeTarget("candidate", noise=noise, noise_seed=seed + 1)
    result = run_divergence(cfg, _Tokenized(base), _Tokenized(cand), texts)
    return {"failed": result.status == "failed", "status": result.status, "reason": result.reason}


class _Tokenized:
    """The divergence check's view of a fake side: a tokenizer and next_token_logprobs."""

    def __init__(self, fake: Any) -> None:
        self.fake, self.tokenizer = fake, self

    def encode(self, text: str) -> list[int]:
        return self.fake.tokenize(text)

    def next_token_logprobs(self, ids: Sequence[int]) -> np.ndarray:
        return self.fake.next_token_logprobs(ids)


def near_tie_trial(seed: int, probe: str, noise: float = 0.005, max_abs_diff: float = 0.05) -> dict[str, Any]:
    """The n > 1 or logprobs probe, a bf16-like candidate (logits off by seeded noise: near ties flip)."""
    from fasttrack.probes.fake import FakeTarget
    from fasttrack.probes.logprobs import LogprobSettings, probe_logprobs
    from fasttrack.probes.n_samples import NSettings, probe_n_samples

    base, cand = FakeTarget("baseline"), FakeTarget("candidate", noise=noise, noise_seed=seed + 1)
    if probe == "n_samples":
        result = probe_n_samples(base, cand, NSettings.from_mapping({"n": 4, "seed": seed}))
    else:
        result = probe_logprobs(
            base, cand, LogprobSettings.from_mapping({"top_logprobs": 5, "max_abs_diff": max_abs_diff})
        )
    return {"failed": result.status == "failed", "status": result.status, "reason": result.reason}


def speculative_trial(seed: int) -> dict[str, Any]:
    """Greedy equality with and without speculation and the acceptance minimum (1.2, the example's)."""
    from fasttrack.kinds.speculative.run import check_draft_length
    from fasttrack.probes.content import prompts
    from fasttrack.probes.fake import FakeTarget

    rng = np.random.default_rng(seed)
    pool = list(prompts()["speculative"])
    chosen = [pool[i] for i in rng.choice(len(pool), size=min(3, len(pool)), replace=False)]
    draft = int(rng.integers(1, 8))
    noise = float(rng.choice([1e-4, 0.02]))
    spec = FakeTarget("candidate", draft_length=draft, noise=noise, noise_seed=seed + 1)
    result = check_draft_length(FakeTarget("candidate", noise=noise, noise_seed=seed + 1), spec, draft, 1.2, chosen)
    return {"failed": result.status == "failed", "status": result.status, "reason": result.reason}


@dataclass(frozen=True)
class EvalCase:
    n: int
    flip: float  # share of items flipped each way (0: identical outputs)
    sequential: bool


def eval_trials(case: EvalCase, sims: int, seed: int, margin: float = 0.05, alpha: float = 0.05) -> list[bool]:
    """The eval rule on simulated clean pairs: per-item 0/1 scores, the candidate flips a share of
    items each way (no true difference); fixed n (paired_comparison) or sequential looks every 8
    items from 8 (the example's sequential settings)."""
    from fasttrack.stats import paired_comparison, sequential_stop_times

    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, size=(sims, case.n))
    base = (rng.random((sims, case.n)) < p).astype(float)
    flip = rng.random((sims, case.n)) < 2 * case.flip  # half of these right->wrong, half wrong->right
    cand = np.where(flip, 1 - base, base)
    if case.sequential:
        codes, _used = sequential_stop_times(cand - base, margin=margin, alpha=alpha, looks=range(8, case.n + 1, 8))
        return [bool(c == -1) for c in codes]
    return [paired_comparison(b, c, margin=margin, alpha=alpha).status == "failed" for b, c in zip(base, cand)]


def speed_trial(seed: int, alpha: float, promise: float | None) -> dict[str, Any]:
    """The benchmark runner's timing loop on the fake, the same (stock) path on both sides: real
    timings of real sleeps and Python work, counterbalanced pairs; true speed-up exactly 1."""
    from fasttrack.kinds.benchmarks.run import SpeedSpec, time_point
    from fasttrack.kinds.benchmarks.timing import decode_rate, synthetic_prompts
    from fasttrack.manifest.sections import SpeedPromise
    from fasttrack.probes.fake import FakeTarget

    sides = {name: FakeTarget(name, step_delay_s=0.001 + 0.0005 * (seed % 3)) for name in ("baseline", "candidate")}
    prompts = synthetic_prompts(sides["baseline"], 4, 8)
    spec = SpeedSpec(alpha=alpha, promises=(), max_pairs=24)
    chosen = SpeedPromise(promise) if promise is not None else None
    comparison, decision = time_point(lambda t: decode_rate(t, prompts, 10), sides, spec, chosen, True, lambda: 1e9)
    return {
        "failed": decision.status.value == "failed",
        "passed": decision.status.value == "passed",
        "status": decision.status.value,
        "pairs": len(comparison.ratios),
        "ratio": comparison.ratio,
    }


def speed_simulated(
    sims: int, seed: int, alpha: float, floor: float, true_median: float, log_sd: float, max_pairs: int = 40
) -> dict[str, Any]:
    """The speed rule (the sequential sign test against ``floor``: a promise, or 1 - margin for
    "not slower than stock") on simulated pair ratios: heavy-tailed noise (half t with 2 degrees
    of freedom, half skewed: lognormal), exact median ``true_median``."""
    from fasttrack.kinds.benchmarks.speed import FAIL, PASS, min_pairs, sequential

    rng = np.random.default_rng(seed)
    fails = passes = 0
    used: list[int] = []
    for s in range(sims):
        if s % 2:
            noise = rng.standard_t(2, size=max_pairs) * log_sd
        else:  # right-skewed: a lognormal(0, 1) has median 1
            noise = (rng.lognormal(0.0, 1.0, size=max_pairs) - 1.0) / 1.3 * log_sd
        ratios = true_median * np.exp(noise)
        n = max(5, min_pairs(alpha))
        seq = sequential(ratios[:n], floor, alpha, bounds=False)
        while seq.decision not in (PASS, FAIL) and n < max_pairs:
            n += 1
            seq = sequential(ratios[:n], floor, alpha, bounds=False)
        fails += seq.decision == FAIL
        passes += seq.decision == PASS
        used.append(n)
    return {"fails": fails, "passes": passes, "sims": sims, "mean_pairs": float(np.mean(used))}


def previous_simulated(sims: int, seed: int, alpha: float, pairs: int = 10) -> int:
    """``--previous`` on two clean runs of the same point (same true speed-up): how often the
    current upper bound falls below the previous lower bound (a flagged drop)."""
    from fasttrack.kinds.benchmarks.speed import sign_bounds

    rng = np.random.default_rng(seed)
    flagged = 0
    for _ in range(sims):
        runs = [3.0 * np.exp(rng.standard_t(3, size=pairs) * 0.1) for _ in range(2)]
        (_lo_now, hi_now), (lo_before, _hi_before) = sign_bounds(runs[0], alpha), sign_bounds(runs[1], alpha)
        flagged += bool(hi_now < lo_before)
    return flagged


# ---------------------------------------------------------------------------------------------
# Real clean runs of the example's feature probes


def real_run(seed: int) -> dict[str, Any]:
    """The example's feature probes (its manifest's settings) with the temperature and n > 1
    seeds set to ``seed``, candidate (latency path, fp32) against stock, TP 1 on the CPU."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import torch

    torch.set_num_threads(1)
    from dataclasses import replace

    from fasttrack.kinds.features.run import probe_settings, run_probe
    from fasttrack.manifest import load_manifest
    from fasttrack.probes.sides import probe_pair

    manifest = load_manifest(MANIFEST)
    point = {"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1}
    started = time.monotonic()
    found: dict[str, Any] = {}
    with probe_pair(manifest, point) as (baseline, candidate):
        for probe in manifest.features:
            if not probe.enabled:
                continue
            config = {"name": probe.name, **dict(probe.settings)}
            settings = probe_settings(probe.name, config, manifest)
            if hasattr(settings, "seed"):
                settings = replace(settings, seed=seed)
            result = run_probe(probe.name, baseline, candidate, settings)
            found[probe.name] = {"status": result.status, "reason": result.reason, "p_value": result.p_value}
    failed = [name for name, r in found.items() if r["status"] == "failed"]
    return {"seed": seed, "failed": failed, "probes": found, "seconds": round(time.monotonic() - started, 1)}


# ---------------------------------------------------------------------------------------------
# Reporting


@dataclass(frozen=True)
class Row:
    check: str
    nominal: float  # alpha; 0 for a deterministic rule
    fails: int
    trials: int
    note: str = ""

    @property
    def interval(self) -> tuple[float, float]:
        ci = stats.binomtest(self.fails, self.trials).proportion_ci(confidence_level=0.95, method="exact")
        return float(ci.low), float(ci.high)

    @property
    def within(self) -> bool:
        if self.nominal == 0:
            return self.fails == 0
        return self.fails / self.trials <= self.nominal and self.interval[1] <= 2 * self.nominal

    def line(self) -> str:
        lo, hi = self.interval
        nominal = "0 (deterministic)" if self.nominal == 0 else f"alpha {self.nominal:g}"
        verdict = "ok" if self.within else "OVER"
        rate = self.fails / self.trials
        return (
            f"{self.check:<58} {self.fails:>5} / {self.trials:<6} rate {rate:.4f}  95% CI [{lo:.4f}, {hi:.4f}]"
            f"  nominal {nominal:<18} {verdict}{('  ' + self.note) if self.note else ''}"
        )


def _map(fn: Callable[[int], dict[str, Any]], seeds: Iterable[int], workers: int) -> list[dict[str, Any]]:
    seeds = list(seeds)
    if workers <= 1:
        return [fn(s) for s in seeds]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, seeds, chunksize=max(1, len(seeds) // (4 * workers))))


class _Partial:
    """A picklable fn(seed) with fixed keyword arguments (for the process pool)."""

    def __init__(self, fn: Callable[..., dict[str, Any]], **kwargs: Any) -> None:
        self.fn, self.kwargs = fn, kwargs

    def __call__(self, seed: int) -> dict[str, Any]:
        return self.fn(seed, **self.kwargs)


def section_probes(seeds: int, workers: int, parts: set[str]) -> list[Row]:
    rows = []
    temperature = (
        ("temperature probe, one-sample (fake, same path)", _Partial(temperature_trial, alpha=0.05)),
        ("temperature probe, two-sample fallback (fake)", _Partial(temperature_trial, alpha=0.05, two_sample=True)),
    )
    for label, fn in temperature if "temperature" in parts else ():
        started = time.monotonic()
        found = _map(fn, range(1, seeds + 1), workers)
        fails = sum(r["failed"] for r in found)
        mins = np.array([r["min_p"] for r in found])
        at_001 = int((mins < 0.01 / 48).sum())
        note = f"(at alpha 0.01: {at_001} / {len(found)}; {time.monotonic() - started:.0f} s)"
        rows.append(Row(label + " at alpha 0.05", 0.05, fails, len(found), note))
    if "thresholds" not in parts:
        return rows
    # 0.005: a path flipping ~1 % of near-tied top-1 tokens, inside the declared 98 % (at 0.02 the
    # fake flips 2.6 %: below the declared agreement, so failing it is right, not a false alarm)
    for noise, what in ((1e-4, "fp32-like"), (0.005, "bf16-like, 1 % flips")):
        found = _map(_Partial(divergence_trial, noise=noise), range(1, seeds + 1), workers)
        rows.append(
            Row(f"divergence thresholds ({what} noise {noise:g})", 0.0, sum(r["failed"] for r in found), len(found))
        )
    # noise 0.005 flips ~1 % of near-tied greedy tokens; at 0.02 the logprobs' value tolerance of
    # 0.05 nats is too tight (7 % of clean runs fail on it): a bf16 candidate needs max_abs_diff 0.1
    cases = (("n_samples", 0.005, 0.05), ("logprobs", 0.005, 0.05), ("n_samples", 0.02, 0.05), ("logprobs", 0.02, 0.1))
    for probe, noise, tolerance in cases:
        trial = _Partial(near_tie_trial, probe=probe, noise=noise, max_abs_diff=tolerance)
        found = _map(trial, range(1, seeds + 1), workers)
        tol = f", max_abs_diff {tolerance:g}" if probe == "logprobs" else ""
        label = f"{probe} near-tie rule (noise {noise:g}{tol})"
        rows.append(Row(label, 0.0, sum(r["failed"] for r in found), len(found)))
    found = _map(speculative_trial, range(1, seeds + 1), workers)
    rows.append(
        Row("speculative: greedy equality + acceptance >= 1.2", 0.0, sum(r["failed"] for r in found), len(found))
    )
    return rows


def section_evals(sims: int) -> list[Row]:
    rows = []
    for case in (
        EvalCase(8, 0.0, True),
        EvalCase(8, 0.02, True),
        EvalCase(8, 0.02, False),
        EvalCase(240, 0.02, True),
        EvalCase(240, 0.02, False),
        EvalCase(240, 0.05, False),
    ):
        fails = sum(eval_trials(case, sims, seed=case.n * 100 + int(case.flip * 1000)))
        how = "sequential" if case.sequential else "fixed n"
        rows.append(Row(f"eval rule, {how}, n={case.n}, flips {case.flip:.0%} each way", 0.05, fails, sims))
    # eval_families: three tasks each exactly at the margin (no worse than it: failing any is a false
    # fail), sharing alpha 0.05 (Bonferroni: each at 0.05 / 3); the family fails when any of them does
    each = [_at_margin_fails(sims, seed=900 + k, alpha=0.05 / 3) for k in range(3)]
    rows.append(Row("eval family of 3 at the margin (bonferroni), n=240", 0.05, sum(map(any, zip(*each))), sims))
    return rows


def _regressed(sims: int, n: int, drop: float, seed: int) -> tuple[Any, Any]:
    """Paired 0/1 scores: the candidate flips 2 % of items each way and turns right answers wrong
    so that its mean is ``drop`` below the baseline's (in expectation)."""
    rng = np.random.default_rng(seed)
    base = (rng.random((sims, n)) < rng.beta(2, 2, size=(sims, n))).astype(float)
    cand = np.where(rng.random((sims, n)) < 0.02, 1 - base, base)
    worse = (rng.random((sims, n)) < drop / max(float(cand.mean()), 1e-9)) & (cand == 1)
    return base, np.where(worse, 0.0, cand)


def _at_margin_fails(sims: int, seed: int, alpha: float, n: int = 240, margin: float = 0.05) -> list[bool]:
    from fasttrack.stats import paired_comparison

    base, cand = _regressed(sims, n, margin, seed)
    return [paired_comparison(b, c, margin=margin, alpha=alpha).status == "failed" for b, c in zip(base, cand)]


def family_power(sims: int, n: int = 240, drop: float = 0.08, margin: float = 0.05) -> list[str]:
    """What sharing the alpha costs: the share of one task regressed by ``drop`` (right answers
    turned wrong, beyond the margin) that its paired test fails, alone at 0.05 and at 0.05 / 3."""
    from fasttrack.stats import paired_comparison

    base, cand = _regressed(sims, n, drop, 4242)
    shares = []
    for alpha in (0.05, 0.05 / 3):
        failed = [paired_comparison(b, c, margin=margin, alpha=alpha).status == "failed" for b, c in zip(base, cand)]
        shares.append(sum(failed) / sims)
    return [
        f"eval family power, n={n}, one task {drop:.0%} worse (margin {margin:g}): fails {shares[0]:.4f} alone at "
        f"alpha 0.05, {shares[1]:.4f} in a family of 3 at 0.05 / 3 ({sims} sims)"
    ]


def section_reference(sims: int, value: float = 0.82, rtol: float = 0.08) -> list[str]:
    """An eval's ``reference`` (vLLM's lm-eval CI rule, `rule.reference_verdict`) on simulated 0/1
    items: the share of candidates it fails when the true mean is the reference (false fails) or
    4 and 8 points below it (power). A point rule: not calibrated to any alpha, so these are
    statements, not checks."""
    from fasttrack.kinds.evals.rule import reference_verdict

    rng = np.random.default_rng(20260)
    lines = []
    for n in (40, 100, 250):
        shares = []
        for true in (value, value - 0.04, value - 0.08):
            means = (rng.random((sims, n)) < true).mean(axis=1)
            shares.append(sum(not reference_verdict(float(m), value, rtol, "at_least") for m in means) / sims)
        lines.append(
            f"reference {value:g} rtol {rtol:g} (at_least), n={n}: fails {shares[0]:.4f} of clean candidates, "
            f"{shares[1]:.4f} at -0.04, {shares[2]:.4f} at -0.08 ({sims} sims)"
        )
    return lines


def section_speed(seeds: int, sims: int, workers: int) -> tuple[list[Row], list[str]]:
    rows = []
    for promise, label in ((None, "not slower than stock"), (1.0, "promise 1.0x (the boundary: same path)")):
        found = _map(_Partial(speed_trial, alpha=0.05, promise=promise), range(seeds), workers)
        fails = sum(r["failed"] for r in found)
        note = f"(passed {sum(r['passed'] for r in found)}, mean pairs {np.mean([r['pairs'] for r in found]):.1f})"
        rows.append(Row(f"speed rule, {label}, fake timings", 0.05, fails, len(found), note))
    for alpha in (0.001, 0.05):
        # "not slower than stock" at the margin's edge (true median 0.95 = the floor): the worst case
        # for both errors; a clean path (true median 1.0) is failed less often still
        for median, what in ((0.95, "at the floor 0.95"), (1.0, "same speed")):
            out = speed_simulated(sims, 7, alpha, 0.95, median, 0.08)
            rows.append(
                Row(
                    f"speed rule, not slower (margin 5 %), {what}, simulated heavy-tailed, alpha {alpha:g}",
                    alpha,
                    out["fails"],
                    sims,
                    f"(passes {out['passes']}, mean pairs {out['mean_pairs']:.1f})",
                )
            )
        out = speed_simulated(sims, 8, alpha, 2.8, 2.8, 0.135)
        rows.append(
            Row(
                f"speed rule, promise at the true median, simulated, alpha {alpha:g}",
                alpha,
                out["fails"],
                sims,
                f"(false passes {out['passes']}, mean pairs {out['mean_pairs']:.1f})",
            )
        )
    flagged = previous_simulated(sims, 9, 0.001)
    rows.append(Row("--previous: drop beyond both intervals (alpha 0.001 bounds)", 0.002, flagged, sims))
    settings = vllm_example_speed_settings()
    cpu_lines = [line for pairs in CPU_PAIRS if pairs.exists() for line in speed_power_cpu(pairs, **settings)]
    return rows, [*speed_power(), *cpu_lines]


def vllm_example_speed_settings() -> dict[str, Any]:
    """alpha, margin and max_pairs of the vLLM example's timed benchmark, as its check uses them."""
    from fasttrack.manifest import load_manifest

    manifest = load_manifest(REPO / "examples" / "vllm-mini-k3" / "fasttrack.yaml")
    bench = next(b for b in manifest.benchmarks if b.workload.get("kind") == "vllm_bench")
    return {"alpha": bench.alpha, "margin": bench.margin, "max_pairs": bench.max_pairs}


def speed_power(alpha: float = 0.001, promise: float = 2.8, max_pairs: int = 40, sims: int = 2000) -> list[str]:
    """The promise rule's power on the H200 batch-64 pair ratios (their log-spread, bootstrapped)."""
    from fasttrack.kinds.benchmarks.speed import FAIL, PASS, min_pairs, sequential

    evidence = json.loads(H200_EVIDENCE.read_text())
    ratios = next(
        c["measurements"]["pair_ratios"]
        for c in evidence["checks"]
        if c["kind"] == "benchmarks"
        and c["name"] == "decode-per-user"
        and (c["scope_point"] or {}).get("batch") == 64
        and c["measurements"].get("pair_ratios")
    )
    logs = np.log(ratios) - np.median(np.log(ratios))
    spread = float(np.std(logs, ddof=1))
    rng = np.random.default_rng(10)
    lines = [
        f"promise {promise}x at batch 64, alpha {alpha}, max_pairs {max_pairs}; pair log-sd {spread:.3f} (H200 evidence)"
    ]
    for slowdown in (0.0, 0.2, 0.25, 0.3, 0.4):
        median = 3.345 * (1 - slowdown)
        outcome = {"passed": 0, "failed": 0, "undecided": 0}
        pairs = []
        for _ in range(sims):
            r = median * np.exp(rng.normal(0, spread, size=max_pairs))
            n = max(5, min_pairs(alpha))
            seq = sequential(r[:n], promise, alpha, bounds=False)
            while seq.decision not in (PASS, FAIL) and n < max_pairs:
                n += 1
                seq = sequential(r[:n], promise, alpha, bounds=False)
            outcome[{PASS: "passed", FAIL: "failed"}.get(seq.decision, "undecided")] += 1
            pairs.append(n)
        lines.append(
            f"  true speed-up {median:.2f}x ({slowdown:.0%} slower than clean): failed {outcome['failed'] / sims:.3f}, "
            f"passed {outcome['passed'] / sims:.3f}, undecided {outcome['undecided'] / sims:.3f}, mean pairs {np.mean(pairs):.1f}"
        )
    return lines


# Recorded clean pairs (benchmarks/record_vllm_pairs.py), the example's servers as they are now
# (pinned, vLLM's worker in the engine-core process): a quiet stretch, a noisy one, and the two
# blocks interleaved with the default worker process; then as they were before (a worker process
# of its own, pinned), and before that (main-job runs, unpinned).
CPU_PAIRS = tuple(
    Path(__file__).resolve().parent / "results" / name
    for name in (
        "vllm-serve-decode-pairs-uni-quiet-epyc.json",
        "vllm-serve-decode-pairs-uni-epyc.json",
        "vllm-serve-decode-pairs-mp-vs-uni-epyc.json",
        "vllm-serve-decode-pairs-pinned.json",
        "vllm-serve-decode-pairs.json",
    )
)


def speed_power_cpu(
    pairs_file: Path, sims: int = 4000, alpha: float = 0.025, margin: float = 0.05, max_pairs: int = 40
) -> list[str]:
    """The "not slower than stock" rule on the 2-core host: clean pair ratios of the vLLM
    example's `vllm bench serve` pairs (median TPOT, recorded by main-job runs), resampled with
    replacement. A candidate s slower than stock (issue 34's "20 % slowdown": candidate/stock
    0.8) keeps the recorded noise around a median of 1 - s: ratios x (1 - s) / their median.
    Prints, per concurrency, how often the clean path decides pass (the issue asks >= 19 in 20)
    and how often a candidate 10, 20 or 30 % slower than stock fails, at the example's settings."""
    from fasttrack.kinds.benchmarks.speed import FAIL, PASS, min_pairs, sequential

    recorded = json.loads(pairs_file.read_text())
    rng = np.random.default_rng(11)
    lines = [
        f"'not slower than stock' on the 2-core host: margin {margin:.0%}, alpha {alpha} per point, max_pairs {max_pairs}, "
        f"{sims} resamples of the recorded clean pairs ({pairs_file.name})"
    ]
    for concurrency, ratios in sorted(recorded["pair_ratios"].items(), key=lambda kv: int(kv[0])):
        pool = np.asarray(ratios, dtype=float)
        for slowdown in (0.0, 0.1, 0.2, 0.3):
            outcome = {"passed": 0, "failed": 0, "undecided": 0}
            pairs = []
            for _ in range(sims):
                r = rng.choice(pool, size=max_pairs, replace=True)
                if slowdown:
                    r = r * (1 - slowdown) / float(np.median(pool))
                n = max(3, min_pairs(alpha))
                seq = sequential(r[:n], 1 - margin, alpha, bounds=False)
                while seq.decision not in (PASS, FAIL) and n < max_pairs:
                    n += 1
                    seq = sequential(r[:n], 1 - margin, alpha, bounds=False)
                outcome[{PASS: "passed", FAIL: "failed"}.get(seq.decision, "undecided")] += 1
                pairs.append(n)
            lines.append(
                f"  concurrency {concurrency} ({len(pool)} recorded pairs, median {np.median(pool):.3f}), "
                f"{slowdown:.0%} slower: passed {outcome['passed'] / sims:.3f}, failed {outcome['failed'] / sims:.3f}, "
                f"undecided {outcome['undecided'] / sims:.3f}, mean pairs {np.mean(pairs):.1f}"
            )
    return lines


def section_real(
    runs: int, workers: int, seed_base: int, results: Path | None, sources: Sequence[Path]
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for source in sources:
        found += [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    if runs:
        seeds = range(seed_base, seed_base + runs)
        if workers <= 1:
            iterator: Iterable[dict[str, Any]] = map(real_run, seeds)
            pool = None
        else:
            import multiprocessing

            pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
            iterator = pool.map(real_run, seeds)
        for record in iterator:
            found.append(record)
            print(
                f"  real run seed {record['seed']}: {'FAILED ' + ', '.join(record['failed']) if record['failed'] else 'clean'}"
                f" ({record['seconds']} s)",
                flush=True,
            )
            if results is not None:
                with results.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(record) + "\n")
        if pool is not None:
            pool.shutdown()
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        default="probes,evals,speed,real,round3",
        help="sections: probes (= temperature, thresholds), evals, reference (an eval's rtol rule: statements), "
        "speed, real, round3 (mixed batches, acceptance vs stock)",
    )
    parser.add_argument("--seeds", type=int, default=200, help="seeds per probe and speed check (real timings)")
    parser.add_argument("--sims", type=int, default=20000, help="simulations per simulated rule")
    parser.add_argument("--real-runs", type=int, default=4, help="real clean runs of the example's probes")
    parser.add_argument("--seed-base", type=int, default=1, help="first seed of the real runs")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--results", type=Path, default=None, help="append each real run as a JSON line here")
    parser.add_argument("--from", dest="sources", type=Path, nargs="*", default=[], help="real-run result files to add")
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",")}
    rows: list[Row] = []
    extra: list[str] = []
    if only & {"probes", "temperature", "thresholds"}:
        parts = {"temperature", "thresholds"} if "probes" in only else only
        rows += section_probes(args.seeds, args.workers, parts)
    if "evals" in only:
        rows += section_evals(args.sims)
    if only & {"evals", "reference"}:
        extra += section_reference(min(args.sims, 4000))
    if "evals" in only:
        extra += family_power(min(args.sims, 2000))
    if "speed" in only:
        speed_rows, speed_extra = section_speed(args.seeds, args.sims, args.workers)
        rows += speed_rows
        extra += speed_extra
    for row in rows:
        print(row.line(), flush=True)
    if "round3" in only:  # issue 34's rules: their false-fail rates and detection of their planted bugs
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import soundness_round3

        soundness_round3.rows(args.seeds, args.workers, detection_seeds=50)
    if extra:
        print("statements (simulated): an eval reference's false fails and power; the speed rules' power:")
        print("\n".join(extra))
    status = 0 if all(r.within for r in rows) else 1
    if "real" in only:
        real = section_real(args.real_runs, args.workers, args.seed_base, args.results, args.sources)
        if real:
            by_probe: dict[str, int] = {}
            for record in real:
                for name in record["probes"]:
                    by_probe[name] = by_probe.get(name, 0) + (name in record["failed"])
            print(
                "real clean runs of the example's probes, failures per probe: "
                + ", ".join(f"{k} {v}" for k, v in sorted(by_probe.items()))
            )
            false = sum(bool(r["failed"]) for r in real)
            print(f"false alarms: {false} of {len(real)} clean runs")
            status = status or int(false > 0)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
