"""Temperature (and top-p) sampling probe: do the candidate's samples follow softmax(logits / T)?

Many seeded samples are drawn from the candidate at several temperatures and top-p values. At each
of the first few positions, samples are grouped by the tokens before it (the conditional
distribution of a position depends on them); the observed token counts of each group are tested
against the baseline's teacher-forced softmax(logits / T) with the top-p cut applied: Pearson's
X^2 after pooling rare tokens (by expected count), summed over the position's groups. At the first
position a score test of the mean log-probability also runs (it sees a mis-applied temperature
where the tokens are too many for X^2). The false-alarm rate is held at ``alpha`` over all
settings x prompts x positions by Bonferroni; p-values below `sampling_stats.SCREEN` are made
exact by Monte Carlo (`fasttrack.probes.sampling_stats` says why: the large-sample
approximations were 2.5-5x too small at the Bonferroni threshold, which made clean candidates
fail about one run in ten).

A token the baseline's nucleus excludes (with a small slack for numerical differences at its
edge) fails the probe outright: top-p was not applied.

When the baseline cannot return full distributions (an HTTP server), the probe falls back to a
two-sample test of the per-position token counts of both sides, drawn with different seeds
(X^2 of the pooled 2 x k table, refined by a permutation test, scipy.stats.permutation_test).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np
from scipy import stats

from fasttrack.probes.base import (
    CapabilityMissing,
    CompletionRequest,
    ProbeResult,
    ProbeTarget,
    TargetFailure,
    failed,
    not_run,
    passed,
    side_by_side,
)
from fasttrack.probes.content import prompts as shipped_prompts
from fasttrack.probes.sampling_stats import (
    SCREEN,
    PooledGroup,
    ScoreNull,
    chi_square,
    chi_square_monte_carlo,
    pool,
    score_monte_carlo,
)
from fasttrack.probes.temperature_two_sample import Refiner, rng_of, two_sample_tests

PROBE = "temperature_sampling"
NUCLEUS_SLACK = 0.02  # tokens this close to the top-p edge may fall either side numerically
MIN_POWER = 0.8  # below this chance of catching an ignored temperature, the probe cannot pass
PROMPTS_PICKED = 2
# A Monte Carlo refinement of one test's p-value, given the per-test threshold: (p, resamples).


@dataclass(frozen=True)
class TemperatureSettings:
    temperatures: tuple[float, ...] = (0.7, 1.0, 1.3)
    top_p: tuple[float, ...] = (1.0, 0.9)
    samples: int = 400
    alpha: float = 0.01
    seed: int = 1234
    positions: int = 3
    prompts: tuple[str, ...] = ()
    min_group: int = 40  # smallest prefix group tested at positions after the first
    max_groups: int = 6  # largest prefix groups tested per position

    @staticmethod
    def from_mapping(values: Mapping[str, Any]) -> TemperatureSettings:
        base = TemperatureSettings()
        chosen = tuple(values.get("prompts") or ())  # empty: picked from the shipped prompts (select_prompts)
        return TemperatureSettings(
            temperatures=tuple(float(t) for t in values.get("temperatures", base.temperatures)),
            top_p=tuple(float(p) for p in values.get("top_p", base.top_p)),
            samples=int(values.get("samples", base.samples)),
            alpha=float(values.get("alpha", base.alpha)),
            seed=int(values.get("seed", base.seed)),
            positions=int(values.get("positions", base.positions)),
            prompts=chosen,
            min_group=int(values.get("min_group", base.min_group)),
            max_groups=int(values.get("max_groups", base.max_groups)),
        )


def expected_distribution(logprobs: np.ndarray, temperature: float, top_p: float) -> np.ndarray:
    """softmax(logprobs / T) restricted to the top-p nucleus (smallest set reaching top_p)."""
    scaled = np.asarray(logprobs, dtype=np.float64) / temperature
    scaled -= scaled.max()
    probs = np.exp(scaled)
    probs /= probs.sum()
    if top_p < 1.0:
        probs = np.where(_nucleus(probs, top_p), probs, 0.0)
        probs /= probs.sum()
    return probs


def _nucleus(probs: np.ndarray, top_p: float) -> np.ndarray:
    order = np.argsort(-probs, kind="stable")
    before = np.cumsum(probs[order]) - probs[order]
    keep = np.zeros(probs.shape, dtype=bool)
    keep[order[before < top_p]] = True
    keep[order[0]] = True
    return keep


def goodness_of_fit(observed: Mapping[int, int], expected_probs: np.ndarray) -> tuple[float, float, int]:
    """(X^2, asymptotic p-value, categories) of observed token counts against a distribution, after
    pooling rare tokens (`sampling_stats.pool`); (0, 1, 1) when nothing is left to test."""
    group = pool(observed, expected_probs)
    if group is None:
        return 0.0, 1.0, 1
    statistic, p_value, _df = chi_square([group])
    return statistic, p_value, group.categories


def _sample(
    target: ProbeTarget, prompt: str, settings: TemperatureSettings, temperature: float, top_p: float, seed: int
) -> list[tuple[int, ...]]:
    request = CompletionRequest(
        prompt, max_tokens=settings.positions, temperature=temperature, top_p=top_p, seed=seed, n=settings.samples
    )
    return [c.token_ids for c in target.complete(request)]


def select_prompts(
    baseline: ProbeTarget, settings: TemperatureSettings, count: int = PROMPTS_PICKED
) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
    """The shipped sampling prompts where an ignored temperature would show most: ranked by the
    per-sample effect size of the score test (|mean log p at T=1 - at T| / sd at T), best first.
    Without full distributions the first ``count`` prompts are used."""
    pool = tuple(shipped_prompts()["sampling"])
    ranked = []
    for prompt in pool:
        try:
            logprobs = baseline.next_token_logprobs(baseline.tokenize(prompt))[-1]
        except CapabilityMissing:
            return pool[:count], []
        effects = [
            abs(score_test(logprobs, [], t, 1.0).get("shift_if_ignored_sd", 0.0))
            for t in settings.temperatures
            if abs(t - 1) > 1e-6
        ]
        ranked.append({"prompt": prompt, "effect": max(effects, default=0.0)})
    ranked.sort(key=lambda r: -r["effect"])
    return tuple(r["prompt"] for r in ranked[:count]), ranked


def probe_temperature(baseline: ProbeTarget, candidate: ProbeTarget, settings: TemperatureSettings) -> ProbeResult:
    tests: list[dict[str, Any]] = []
    refiners: list[tuple[dict[str, Any], Refiner]] = []
    selection: list[dict[str, Any]] = []
    try:
        if not settings.prompts:
            chosen, selection = select_prompts(baseline, settings)
            settings = replace(settings, prompts=chosen)
        full = _has_full_distributions(baseline, settings.prompts[0])
    except TargetFailure as exc:
        return failed(PROBE, f"the baseline failed to score the probe prompt: {exc}", {}, code="target")
    per_setting = settings.positions + (1 if full else 0)  # + the score test at the first position
    n_tests = len(settings.temperatures) * len(settings.top_p) * len(settings.prompts) * per_setting
    threshold = settings.alpha / n_tests
    for p_index, prompt in enumerate(settings.prompts):
        for temperature in settings.temperatures:
            for top_p in settings.top_p:
                seed = settings.seed + 1000 * p_index
                # Without full distributions the candidate is compared with stock's own samples,
                # asked of both servers at once.
                reference, drawn = side_by_side(
                    baseline,
                    candidate,
                    (lambda: None)
                    if full
                    else partial(_sample, baseline, prompt, settings, temperature, top_p, seed + 7_777_777),
                    partial(_sample, candidate, prompt, settings, temperature, top_p, seed),
                )
                try:
                    samples = drawn.get()
                except TargetFailure as exc:
                    return failed(
                        PROBE,
                        f"the candidate failed a sampling request at T={temperature}, top_p={top_p}: {exc}",
                        {"tests": tests},
                        code="target",
                    )
                if len(samples) != settings.samples:
                    return failed(
                        PROBE,
                        f"asked for n={settings.samples} samples at T={temperature}, the candidate returned {len(samples)}",
                        {"tests": tests},
                    )
                label = {"prompt": p_index, "temperature": temperature, "top_p": top_p}
                if full:
                    found = _one_sample_tests(baseline, prompt, samples, settings, temperature, top_p)
                else:
                    found = two_sample_tests(
                        reference.get() or [], samples, settings.positions, settings.seed, temperature
                    )
                for entry, refine in found:
                    entry.update(label)
                    tests.append(entry)
                    if refine is not None:
                        refiners.append((entry, refine))
    refine_small_p_values(refiners, threshold)
    result = _decide(tests, threshold, settings, full)
    if selection:
        result = replace(result, details={**result.details, "prompt_selection": selection})
    return result


def refine_small_p_values(refiners: Sequence[tuple[dict[str, Any], Refiner]], threshold: float) -> None:
    """Exact (Monte Carlo) p-values for the tests whose asymptotic p is below the screen, smallest
    first. Once one is below the threshold the probe fails: the rest keep their asymptotic p as
    ``p_asymptotic`` only, so that no approximate p-value is reported as the deciding one."""
    pending = sorted(
        ((e, f) for e, f in refiners if e.get("p_value") is not None and e["p_value"] < SCREEN),
        key=lambda ef: ef[0]["p_value"],
    )
    decided = False
    for entry, refine in pending:
        entry["p_asymptotic"] = entry["p_value"]
        if decided:
            del entry["p_value"]
            entry["p_method"] = "asymptotic, not refined (another test already failed)"
            continue
        entry["p_value"], resamples = refine(threshold)
        entry["p_method"] = f"Monte Carlo ({resamples} resamples)"
        decided = entry["p_value"] < threshold


def _has_full_distributions(baseline: ProbeTarget, prompt: str) -> bool:
    try:
        baseline.next_token_logprobs(baseline.tokenize(prompt))
        return True
    except CapabilityMissing:
        return False


def _one_sample_tests(
    baseline: ProbeTarget,
    prompt: str,
    samples: Sequence[tuple[int, ...]],
    settings: TemperatureSettings,
    temperature: float,
    top_p: float,
) -> list[tuple[dict[str, Any], Refiner | None]]:
    prompt_ids = baseline.tokenize(prompt)
    results: list[tuple[dict[str, Any], Refiner | None]] = []
    for position in range(settings.positions):
        groups: dict[tuple[int, ...], Counter] = defaultdict(Counter)
        for tokens in samples:
            if len(tokens) > position:
                groups[tuple(tokens[:position])][tokens[position]] += 1
        minimum = 1 if position == 0 else settings.min_group
        chosen = sorted((g for g in groups.items() if sum(g[1].values()) >= minimum), key=lambda g: -sum(g[1].values()))
        pooled: list[PooledGroup] = []
        outside = 0
        for prefix, counts in chosen[: settings.max_groups]:
            logprobs = baseline.next_token_logprobs(prompt_ids + list(prefix))[-1]
            probs = expected_distribution(logprobs, temperature, top_p)
            if top_p < 1.0:
                allowed = _nucleus(expected_distribution(logprobs, temperature, 1.0), min(1.0, top_p + NUCLEUS_SLACK))
                outside += sum(c for t, c in counts.items() if not allowed[t])
            group = pool(counts, probs)
            if group is not None:
                pooled.append(group)
        entry: dict[str, Any] = {
            "test": "chi_square",
            "position": position,
            "groups": len(pooled),
            "n": sum(g.n for g in pooled),
            "outside_nucleus": outside,
        }
        refine: Refiner | None = None
        if pooled:
            statistic, p_value, df = chi_square(pooled)
            entry.update(statistic=statistic, p_value=p_value, df=df, p_method="asymptotic chi-square")
            label = (settings.seed, len(prompt), temperature, top_p, position)
            refine = lambda threshold, g=tuple(pooled), lab=label: chi_square_monte_carlo(g, threshold, rng_of(*lab))  # noqa: E731
        results.append((entry, refine))
    first = [t[0] for t in samples if t]
    logprobs = baseline.next_token_logprobs(prompt_ids)[-1]
    score = score_test(logprobs, first, temperature, top_p)
    score_refine: Refiner | None = None
    if "p_value" in score:
        null = _score_null(logprobs, temperature, top_p)
        label = (settings.seed, len(prompt), temperature, top_p, -1)
        score_refine = lambda threshold: score_monte_carlo(null, first, threshold, rng_of(*label))  # noqa: E731
    results.append((score, score_refine))
    return results


def _score_null(logprobs: np.ndarray, temperature: float, top_p: float) -> ScoreNull:
    logp = np.asarray(logprobs, dtype=np.float64)
    return ScoreNull(np.where(np.isfinite(logp), logp, -1e9), expected_distribution(logp, temperature, top_p))


def score_test(logprobs: np.ndarray, tokens: Sequence[int], temperature: float, top_p: float) -> dict[str, Any]:
    """Mean-log-probability z-test of first tokens, and its power against an ignored temperature.

    Under a correct sampler the baseline log-probability ``log p(x)`` of a token drawn from
    q = softmax(logits/T) (top-p cut) has mean Σ q log p and variance Σ q (log p)² - mean²; the
    z-score of the sum over n samples is approximately N(0, 1) (the asymptotic p; small ones are
    made exact by Monte Carlo, `sampling_stats.score_monte_carlo`). A temperature that is ignored
    or mis-applied moves this mean (sharper or flatter sampling) even when the distribution is too
    flat for a chi-square test over tokens, which needs ≥ 5 expected samples per category.
    """
    null = _score_null(logprobs, temperature, top_p)
    logp = np.asarray(logprobs, dtype=np.float64)
    mean, var = null.mean, null.var
    n = len(tokens)
    entry: dict[str, Any] = {"test": "score", "position": 0, "groups": 1, "n": n, "outside_nucleus": 0}
    if var <= 0:
        return entry
    if abs(temperature - 1.0) > 1e-6:
        ignored = expected_distribution(logp, 1.0, top_p)
        shift = float((ignored * null.logp).sum()) - mean
        entry["shift_if_ignored_sd"] = shift / np.sqrt(var)  # per-sample effect size
    if n == 0:
        return entry
    observed = float(sum(null.logp[t] for t in tokens))
    z = (observed - n * mean) / np.sqrt(n * var)
    entry.update(
        {
            "statistic": float(z),
            "p_value": float(2 * stats.norm.sf(abs(z))),
            "p_method": "asymptotic normal",
            "expected_mean_logprob": mean,
            "observed_mean_logprob": observed / n,
        }
    )
    return entry


def _power_if_ignored(tests: list[dict[str, Any]], threshold: float) -> float | None:
    """The best power, over the settings with T != 1, of the score test against T ignored (T = 1)."""
    powers = []
    z_crit = stats.norm.isf(threshold / 2)
    for t in tests:
        if t.get("shift_if_ignored_sd") is not None:
            powers.append(stats.norm.sf(z_crit - abs(t["shift_if_ignored_sd"]) * np.sqrt(t["n"])))
        if t.get("ignored_noncentrality") is not None:
            df = t["ignored_df"]
            powers.append(stats.ncx2.sf(stats.chi2.isf(threshold, df), df, t["ignored_noncentrality"]))
    return float(max(powers)) if powers else None


def _p_text(p_value: float) -> str:
    return "<1e-300" if p_value < 1e-300 else f"{p_value:.2e}"


def _details(tests: list[dict[str, Any]], threshold: float, full: bool) -> dict[str, Any]:
    return {
        "tests": tests,
        "per_test_alpha": threshold,
        "method": "one-sample chi-square vs baseline softmax(logits/T)"
        if full
        else "two-sample chi-square (baseline returns only top-k)",
    }


def _decide(tests: list[dict[str, Any]], threshold: float, settings: TemperatureSettings, full: bool) -> ProbeResult:
    details = _details(tests, threshold, full)
    scored = [t for t in tests if "p_value" in t]
    if not scored:
        return not_run(
            PROBE,
            "no position had a testable distribution (every sample chose the same token)",
            "underpowered",
            details,
        )
    outside = [t for t in tests if t.get("outside_nucleus")]
    worst = min(scored, key=lambda t: t["p_value"])
    adjusted = min(1.0, worst["p_value"] * len(tests))
    details["bonferroni_tests"] = len(tests)
    if worst["p_value"] < threshold:
        note = (
            f"; {sum(t['outside_nucleus'] for t in outside)} sample(s) fell outside the top-p nucleus"
            if outside
            else ""
        )
        return failed(
            PROBE,
            (
                f"sampled tokens do not follow the baseline's softmax(logits/T) at T={worst['temperature']}, "
                f"top_p={worst['top_p']}, position {worst['position']} (prompt {worst['prompt']}): "
                f"p={_p_text(worst['p_value'])} < {threshold:.1e} (alpha {settings.alpha} / {len(tests)} tests){note}; "
                "temperature or top-p is ignored or mis-applied"
            ),
            details,
            statistic=worst["statistic"],
            p_value=adjusted,
        )
    power = _power_if_ignored(tests, threshold)
    if power is not None:
        details["power_if_temperature_ignored"] = power
        if power < MIN_POWER:
            return not_run(
                PROBE,
                (
                    f"underpowered: with {settings.samples} samples the test would catch an ignored temperature with "
                    f"probability {power:.2f} only (< {MIN_POWER}): the baseline's next-token distributions are too "
                    "flat at these prompts and temperatures; use more samples or temperatures further from 1"
                ),
                "underpowered",
                details,
            )
    if outside:
        first = outside[0]
        return failed(
            PROBE,
            (
                f"at T={first['temperature']}, top_p={first['top_p']} the candidate sampled {first['outside_nucleus']} "
                f"token(s) outside the baseline's top-p nucleus at position {first['position']}: top-p is not applied"
            ),
            details,
            statistic=worst["statistic"],
            p_value=0.0,
        )
    return passed(PROBE, details, statistic=worst["statistic"], p_value=adjusted)
