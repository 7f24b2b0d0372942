"""Temperature (and top-p) sampling probe: do the candidate's samples follow softmax(logits / T)?

Many seeded samples are drawn from the candidate at several temperatures and top-p values. At each
of the first few positions, samples are grouped by the tokens before it (the conditional
distribution of a position depends on them); the observed token counts of each group are tested
against the baseline's teacher-forced softmax(logits / T) with the top-p cut applied:
Pearson's chi-square (scipy.stats.chisquare) after pooling rare tokens so that every expected
count is at least 5, or an exact binomial test when pooling leaves only "top token vs the rest".
The p-values of the groups of one position are combined with Fisher's method. The false-alarm
rate is held at ``alpha`` over all settings × prompts × positions by Bonferroni.

A token the baseline's nucleus excludes (with a small slack for numerical differences at its
edge) fails the probe outright: top-p was not applied.

When the baseline cannot return full distributions (an HTTP server), the probe falls back to a
two-sample test (scipy.stats.chi2_contingency) of the per-position token counts of both sides,
drawn with different seeds.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
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
)
from fasttrack.probes.content import prompts as shipped_prompts

PROBE = "temperature_sampling"
MIN_EXPECTED = 5.0  # the usual validity rule for Pearson's chi-square
NUCLEUS_SLACK = 0.02
MIN_POWER = 0.8
PROMPTS_PICKED = 2  # below this chance of catching an ignored temperature, the probe cannot pass  # tokens this close to the top-p edge may fall either side numerically


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
    """(statistic, p-value, categories) of observed token counts against a distribution.

    Tokens are sorted by expected count; those below MIN_EXPECTED are pooled into one category,
    and a pool still below it joins the smallest kept category. With only two categories left and
    a small expected count, the exact binomial test is used instead of the chi-square
    approximation (statistic: the observed count of the most likely token).
    """
    n = sum(observed.values())
    expected = expected_probs * n
    order = [int(t) for t in np.argsort(-expected, kind="stable")]
    kept = [t for t in order if expected[t] >= MIN_EXPECTED]
    if not kept:
        kept = order[:1]
    kept_set = set(kept)
    obs = [float(observed.get(t, 0)) for t in kept]
    exp = [float(expected[t]) for t in kept]
    rest_obs = float(sum(c for t, c in observed.items() if t not in kept_set))
    rest_exp = float(n - sum(exp))
    if rest_exp >= MIN_EXPECTED or (len(kept) == 1 and (rest_exp > 0 or rest_obs > 0)):
        obs.append(rest_obs)
        exp.append(max(rest_exp, 0.0))
    elif rest_obs or rest_exp:
        obs[-1] += rest_obs
        exp[-1] += rest_exp
    if len(obs) < 2:
        return 0.0, 1.0, 1  # everything on one token, as expected: nothing to test
    if min(exp) < MIN_EXPECTED and len(obs) == 2:
        p_top = exp[0] / n
        result = stats.binomtest(int(obs[0]), n, min(max(p_top, 0.0), 1.0))
        return float(obs[0]), float(result.pvalue), 2
    exp_arr = np.asarray(exp)
    exp_arr *= n / exp_arr.sum()
    statistic, p_value = stats.chisquare(np.asarray(obs), exp_arr)
    return float(statistic), float(p_value), len(obs)


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
                try:
                    samples = _sample(candidate, prompt, settings, temperature, top_p, seed)
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
                    reference = _sample(baseline, prompt, settings, temperature, top_p, seed + 7_777_777)
                    found = _two_sample_tests(reference, samples, settings, temperature)
                for entry in found:
                    entry.update(label)
                    tests.append(entry)
    result = _decide(tests, threshold, settings, full)
    if selection:
        result = replace(result, details={**result.details, "prompt_selection": selection})
    return result


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
) -> list[dict[str, Any]]:
    prompt_ids = baseline.tokenize(prompt)
    results = []
    for position in range(settings.positions):
        groups: dict[tuple[int, ...], Counter] = defaultdict(Counter)
        for tokens in samples:
            if len(tokens) > position:
                groups[tuple(tokens[:position])][tokens[position]] += 1
        minimum = 1 if position == 0 else settings.min_group
        chosen = sorted((g for g in groups.items() if sum(g[1].values()) >= minimum), key=lambda g: -sum(g[1].values()))
        p_values, statistics, outside, tested = [], [], 0, 0
        for prefix, counts in chosen[: settings.max_groups]:
            logprobs = baseline.next_token_logprobs(prompt_ids + list(prefix))[-1]
            probs = expected_distribution(logprobs, temperature, top_p)
            if top_p < 1.0:
                allowed = _nucleus(expected_distribution(logprobs, temperature, 1.0), min(1.0, top_p + NUCLEUS_SLACK))
                outside += sum(c for t, c in counts.items() if not allowed[t])
            statistic, p_value, categories = goodness_of_fit(counts, probs)
            if categories >= 2:
                p_values.append(p_value)
                statistics.append(statistic)
                tested += sum(counts.values())
        entry: dict[str, Any] = {
            "test": "chi_square",
            "position": position,
            "groups": len(p_values),
            "n": tested,
            "outside_nucleus": outside,
        }
        if p_values:
            combined = stats.combine_pvalues(p_values, method="fisher") if len(p_values) > 1 else None
            entry["p_value"] = float(combined.pvalue) if combined is not None else p_values[0]
            entry["statistic"] = float(combined.statistic) if combined is not None else statistics[0]
        results.append(entry)
    first = [t[0] for t in samples if t]
    results.append(score_test(baseline.next_token_logprobs(prompt_ids)[-1], first, temperature, top_p))
    return results


def score_test(logprobs: np.ndarray, tokens: Sequence[int], temperature: float, top_p: float) -> dict[str, Any]:
    """Mean-log-probability z-test of first tokens, and its power against an ignored temperature.

    Under a correct sampler the baseline log-probability ``log p(x)`` of a token drawn from
    q = softmax(logits/T) (top-p cut) has mean Σ q log p and variance Σ q (log p)² - mean²; the
    z-score of the sum over n samples is N(0, 1). A temperature that is ignored or mis-applied
    moves this mean (sharper or flatter sampling) even when the distribution is too flat for a
    chi-square test over tokens, which needs ≥ 5 expected samples per category.
    """
    logp = np.asarray(logprobs, dtype=np.float64)
    finite = np.where(np.isfinite(logp), logp, -1e9)
    q = expected_distribution(logp, temperature, top_p)
    mean = float((q * finite).sum())
    var = float((q * finite**2).sum() - mean**2)
    n = len(tokens)
    entry: dict[str, Any] = {"test": "score", "position": 0, "groups": 1, "n": n, "outside_nucleus": 0}
    if var <= 0:
        return entry
    if abs(temperature - 1.0) > 1e-6:
        ignored = expected_distribution(logp, 1.0, top_p)
        shift = float((ignored * finite).sum()) - mean
        entry["shift_if_ignored_sd"] = shift / np.sqrt(var)  # per-sample effect size
    if n == 0:
        return entry
    observed = float(sum(finite[t] for t in tokens))
    z = (observed - n * mean) / np.sqrt(n * var)
    entry.update(
        {
            "statistic": float(z),
            "p_value": float(2 * stats.norm.sf(abs(z))),
            "expected_mean_logprob": mean,
            "observed_mean_logprob": observed / n,
        }
    )
    return entry


def _two_sample_tests(
    reference: Sequence[tuple[int, ...]],
    samples: Sequence[tuple[int, ...]],
    settings: TemperatureSettings,
    temperature: float,
) -> list[dict[str, Any]]:
    results = []
    for position in range(settings.positions):
        a = Counter(t[position] for t in reference if len(t) > position)
        b = Counter(t[position] for t in samples if len(t) > position)
        entry: dict[str, Any] = {
            "test": "two_sample_chi_square",
            "position": position,
            "groups": 1,
            "n": sum(b.values()),
            "outside_nucleus": 0,
        }
        table = _pooled_table(a, b)
        if table is not None:
            result = stats.chi2_contingency(table)
            entry["p_value"] = float(result.pvalue)
            entry["statistic"] = float(result.statistic)
            if position == 0 and abs(temperature - 1.0) > 1e-6:
                entry.update(_ignored_alternative(a, temperature, sum(a.values()), sum(b.values())))
        results.append(entry)
    return results


def _ignored_alternative(counts: Counter, temperature: float, n_ref: int, n_cand: int) -> dict[str, Any]:
    """Noncentrality of the two-sample chi-square if the candidate sampled at T = 1 instead of T.

    The baseline's own samples estimate q = softmax(logits/T); sampling at 1 instead gives
    p ∝ q^T. Rare tokens (fewer than 5 samples) are pooled and treated as equally likely.
    """
    total = sum(counts.values())
    kept = {t: c / total for t, c in counts.items() if c >= MIN_EXPECTED}
    rare = [c for c in counts.values() if c < MIN_EXPECTED]
    q = list(kept.values())
    alt = [v**temperature for v in q]
    if rare:
        mass = sum(rare) / total
        q.append(mass)
        alt.append(len(rare) * (mass / len(rare)) ** temperature)
    q_arr, alt_arr = np.asarray(q), np.asarray(alt) / sum(alt)
    n_eff = n_ref * n_cand / (n_ref + n_cand)
    mix = (q_arr + alt_arr) / 2
    return {
        "ignored_noncentrality": float(n_eff * ((alt_arr - q_arr) ** 2 / mix).sum()),
        "ignored_df": max(1, len(q) - 1),
    }


def _pooled_table(a: Counter, b: Counter) -> np.ndarray | None:
    """A 2 × k contingency table with rare tokens pooled (expected count ≥ 5 under homogeneity)."""
    total_a, total_b = sum(a.values()), sum(b.values())
    if not total_a or not total_b:
        return None
    share = min(total_a, total_b) / (total_a + total_b)
    tokens = sorted(set(a) | set(b), key=lambda t: -(a[t] + b[t]))
    kept = [t for t in tokens if (a[t] + b[t]) * share >= MIN_EXPECTED]
    rest = [t for t in tokens if t not in set(kept)]
    rows = [[a[t] for t in kept], [b[t] for t in kept]]
    rest_a, rest_b = sum(a[t] for t in rest), sum(b[t] for t in rest)
    if (rest_a + rest_b) * share >= MIN_EXPECTED or (kept and len(kept) == 1 and rest_a + rest_b):
        rows[0].append(rest_a)
        rows[1].append(rest_b)
    elif kept:
        rows[0][-1] += rest_a
        rows[1][-1] += rest_b
    return np.asarray(rows) if len(rows[0]) >= 2 else None


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
