"""Mixed batches: heterogeneous requests sent together must each be served with their own parameters.

Every other probe sends one kind of request at a time (the temperature probe: one request with
n samples per setting), so a candidate that samples every row of a decode step with the first
row's temperature passes them all. This probe sends one batch of rows that differ in every
per-request parameter (greedy beside sampled, different temperatures, top_p, seeds, max_tokens,
stop strings, logprobs on and off, structured output beside free text), twice: in the declared
order (a greedy row first) and rotated by one (a sampled row first), so that a parameter leaking from
any one row into the others shows. Each row is then judged against its own reference:

- greedy rows (free text, with a stop string, structured): token-exact with the same request
  sent alone to the candidate; a row that also differs alone vs batched on stock is the engine's
  own batch variance, recorded and not failed;
- every row: its own ``max_tokens``, its stop string absent from the text, logprobs present
  (``top`` of at most k) exactly where asked, the structured row valid for its schema;
- sampled rows: their first tokens against their own expected distribution, with the
  temperature probe's statistics: stock's softmax(logits / T) with the top-p cut (score test and
  chi-square, small p-values made exact by Monte Carlo), or over HTTP a two-sample test against
  the same row sent alone to stock. The probe's false-alarm rate is ``alpha`` (Bonferroni over
  every sampled test of both orders; the greedy checks are exact).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from scipy import stats

from fasttrack.probes.base import Completion, CompletionRequest, ProbeResult, ProbeTarget, failed, not_run, passed
from fasttrack.probes.content import prompts as shipped_prompts
from fasttrack.probes.mixed_batch_rows import Row, check_greedy_row, check_row_shape, sampled_tests
from fasttrack.probes.temperature import refine_small_p_values
from fasttrack.probes.temperature_two_sample import Refiner

PROBE = "mixed_batches"
MIN_POWER = 0.8  # below this chance of seeing a greedy row's setting leak into the sampled rows, no pass
SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}},
    "required": ["name"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class MixedBatchSettings:
    samples: int = 200  # n of each sampled row
    alpha: float = 0.01  # the probe's whole false-alarm rate
    seed: int = 4321
    max_tokens: int = 12  # of the greedy rows
    positions: int = 2  # sampled tokens tested per sampled row
    prompts: tuple[str, ...] = ()

    @staticmethod
    def from_mapping(values: Mapping[str, Any]) -> MixedBatchSettings:
        base = MixedBatchSettings()
        return MixedBatchSettings(
            samples=int(values.get("samples", base.samples)),
            alpha=float(values.get("alpha", base.alpha)),
            seed=int(values.get("seed", base.seed)),
            max_tokens=int(values.get("max_tokens", base.max_tokens)),
            positions=int(values.get("positions", base.positions)),
            prompts=tuple(values.get("prompts") or ()),
        )


def mixed_rows(settings: MixedBatchSettings, stop: str | None) -> list[Row]:
    """One batch, greedy first: rows that differ in every per-request parameter."""
    chosen = settings.prompts or tuple(shipped_prompts()["sampling"])
    p = [chosen[i % len(chosen)] for i in range(4)]
    m, n, k = settings.max_tokens, settings.samples, settings.positions
    rows = [
        Row("greedy+logprobs", "greedy", CompletionRequest(p[0], max_tokens=m, logprobs=5)),
        Row("T1.3", "sampled", CompletionRequest(p[1], max_tokens=k, temperature=1.3, seed=settings.seed, n=n)),
        Row("greedy-short", "greedy", CompletionRequest(p[2], max_tokens=max(2, m // 3))),
        Row(
            "T0.7,top_p0.9",
            "sampled",
            CompletionRequest(p[0], max_tokens=k, temperature=0.7, top_p=0.9, seed=settings.seed + 1, n=n),
        ),
        Row("structured", "greedy", CompletionRequest(p[3], max_tokens=4 * m, json_schema=SCHEMA)),
        Row(
            "T1.0+logprobs",
            "sampled",
            CompletionRequest(p[2], max_tokens=k, temperature=1.0, seed=settings.seed + 2, n=n, logprobs=2),
        ),
    ]
    if stop is not None:
        rows.append(Row("greedy+stop", "greedy", CompletionRequest(p[1], max_tokens=m, stop=(stop,), ignore_eos=True)))
    return rows


def pick_stop(candidate: ProbeTarget, prompt: str, max_tokens: int) -> str | None:
    """A stop string first met near the middle of the greedy continuation of ``prompt`` (None: no
    usable text)."""
    text = candidate.complete(CompletionRequest(prompt, max_tokens=max_tokens, ignore_eos=True))[0].text
    firsts = [
        (abs(start - len(text) // 2), text[start : start + width])
        for width in (2, 1)
        for start in range(1, len(text) - width + 1)
        if text[start : start + width].strip() and text.find(text[start : start + width]) == start
    ]
    if firsts:
        return min(firsts)[1]
    return None


def probe_mixed_batches(baseline: ProbeTarget, candidate: ProbeTarget, settings: MixedBatchSettings) -> ProbeResult:
    unstopped = mixed_rows(settings, None)
    stop_prompt = unstopped[1].request.prompt
    stop = pick_stop(candidate, stop_prompt, settings.max_tokens) if isinstance(stop_prompt, str) else None
    rows = mixed_rows(settings, stop)
    orders = {"greedy_first": rows, "sampled_first": rows[1:] + rows[:1]}
    alone = {r.label: candidate.complete(r.request)[0] for r in rows if r.kind == "greedy"}
    stock_batches: dict[str, list[list[Completion]]] = {}
    problems: list[str] = []
    records: list[dict[str, Any]] = []
    tests: list[dict[str, Any]] = []
    refiners: list[tuple[dict[str, Any], Refiner]] = []
    for order, batch in orders.items():
        got = candidate.complete_batch([r.request for r in batch])

        def stock_pair(index: int, order: str = order, batch: list[Row] = batch) -> tuple[Completion, Completion]:
            if order not in stock_batches:
                stock_batches[order] = baseline.complete_batch([r.request for r in batch])
            return stock_batches[order][index][0], baseline.complete(batch[index].request)[0]

        for index, (row, outputs) in enumerate(zip(batch, got)):
            record: dict[str, Any] = {"order": order, "index": index, "row": row.label, "kind": row.kind}
            problems += [f"{order}, row {row.label}: {p}" for p in check_row_shape(row, outputs, SCHEMA)]
            if row.kind == "greedy" and outputs:
                problem = check_greedy_row(row, outputs[0], alone[row.label], partial(stock_pair, index))
                record["equal_alone"] = problem is None
                if problem is not None and problem.startswith("stock"):
                    record["stock_batch_variant"] = problem
                elif problem is not None:
                    problems.append(f"{order}, row {row.label}: {problem}")
            elif row.kind == "sampled":
                for entry, refine in sampled_tests(baseline, row, outputs, settings.positions, settings.seed):
                    entry.update(order=order, row=row.label)
                    tests.append(entry)
                    if refine is not None:
                        refiners.append((entry, refine))
            records.append(record)
    return decide(tests, refiners, problems, records, settings)


def decide(
    tests: list[dict[str, Any]],
    refiners: Sequence[Any],
    problems: Sequence[str],
    rows: list[dict[str, Any]],
    settings: MixedBatchSettings,
) -> ProbeResult:
    threshold = settings.alpha / max(1, len(tests))
    refine_small_p_values(refiners, threshold)
    details: dict[str, Any] = {"rows": rows, "tests": tests, "per_test_alpha": threshold, "alpha": settings.alpha}
    if problems:
        return failed(PROBE, f"per-request parameters are not kept in a mixed batch: {problems[0]}", details)
    scored = [t for t in tests if t.get("p_value") is not None]
    if not scored:
        return not_run(PROBE, "no sampled row had a testable distribution", "underpowered", details)
    worst = min(scored, key=lambda t: t["p_value"])
    adjusted = min(1.0, worst["p_value"] * len(tests))
    if worst["p_value"] < threshold:
        return failed(
            PROBE,
            (
                f"in a mixed batch ({worst['order']}) the sampled row {worst['row']} does not follow its own "
                f"distribution at position {worst['position']}: p={worst['p_value']:.2e} < {threshold:.1e} "
                f"(alpha {settings.alpha} / {len(tests)} tests): another row's sampling parameters leak into it"
            ),
            details,
            statistic=worst.get("statistic"),
            p_value=adjusted,
        )
    power = leak_power(tests, threshold)
    details["power_if_greedy_leaks"] = power
    if power < MIN_POWER:
        return not_run(
            PROBE,
            (
                f"underpowered: with {settings.samples} samples per sampled row a greedy setting leaking into them would "
                f"be caught with probability {power:.2f} only (< {MIN_POWER}); use more samples or other prompts"
            ),
            "underpowered",
            details,
        )
    outside = [t for t in tests if t.get("outside_nucleus")]
    if outside:
        return failed(
            PROBE,
            f"in a mixed batch the row {outside[0]['row']} sampled outside its top-p nucleus: top-p leaks across rows",
            details,
            p_value=0.0,
        )
    return passed(
        PROBE, json.loads(json.dumps(details, default=str)), statistic=worst.get("statistic"), p_value=adjusted
    )


def leak_power(tests: Sequence[Mapping[str, Any]], threshold: float) -> float:
    """The best chance, over the sampled rows, that the first position's chi-square catches the
    row sampled greedily (a greedy row's setting leaking into it), at the per-test threshold."""
    powers = [
        float(stats.ncx2.sf(stats.chi2.isf(threshold, t["leak_df"]), t["leak_df"], t["leak_noncentrality"]))
        for t in tests
        if t.get("leak_noncentrality") is not None and np.isfinite(t["leak_noncentrality"])
    ]
    return max(powers, default=0.0)
