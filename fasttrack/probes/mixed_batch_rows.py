"""The rows of a mixed batch and how each is judged against its own reference (`mixed_batch`)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fasttrack.probes.base import CapabilityMissing, Completion, CompletionRequest, ProbeTarget, first_difference
from fasttrack.probes.temperature import TemperatureSettings, _one_sample_tests, expected_distribution
from fasttrack.probes.temperature_two_sample import Refiner, two_sample_tests

REFERENCE_SEED_OFFSET = 7_777_777  # stock's reference sample over HTTP: another seed than the row's


@dataclass(frozen=True)
class Row:
    label: str
    kind: str  # greedy | sampled
    request: CompletionRequest


def check_row_shape(row: Row, outputs: Sequence[Completion], schema: Mapping[str, Any]) -> list[str]:
    """What the row's own parameters promise of every output: n, max_tokens, the stop string,
    logprobs exactly where asked, the schema where one was given."""
    r = row.request
    problems = []
    if len(outputs) != r.n:
        problems.append(f"asked for n={r.n}, got {len(outputs)} outputs")
    for c in outputs[:1] if r.n == 1 else outputs:
        if len(c.token_ids) > r.max_tokens:
            problems.append(f"{len(c.token_ids)} tokens beyond its max_tokens {r.max_tokens}")
        if r.stop and any(s in c.text for s in r.stop):
            problems.append(f"its stop string {r.stop[0]!r} is in the text {c.text[:40]!r}")
        if r.logprobs is None and c.logprobs is not None:
            problems.append("logprobs returned where the row asked for none")
        elif r.logprobs is not None and (c.logprobs is None or len(c.logprobs) != len(c.token_ids)):
            problems.append(f"asked for logprobs={r.logprobs}, got none or not one per token")
        elif r.logprobs is not None and any(len(e.top) > r.logprobs for e in c.logprobs or ()):
            problems.append(f"asked for the top {r.logprobs} logprobs, got more")
        if r.json_schema is not None:
            problems += _schema_problems(c.text, schema)
        if problems:
            break
    return problems


def _schema_problems(text: str, schema: Mapping[str, Any]) -> list[str]:
    from jsonschema import Draft202012Validator

    try:
        value = json.loads(text)
    except ValueError:
        return [f"the structured row's text is not JSON: {text[:60]!r}"]
    error = next(iter(Draft202012Validator(dict(schema)).iter_errors(value)), None)
    return [] if error is None else [f"the structured row's JSON breaks its schema: {error.message}"]


def same_output(a: Completion, b: Completion) -> int | None:
    """Where two greedy outputs first differ (token ids where both have them, else text)."""
    if a.token_ids and b.token_ids:
        return first_difference(a.token_ids, b.token_ids)
    return first_difference(a.text, b.text)


def check_greedy_row(
    row: Row, got: Completion, alone: Completion, stock_pair: Callable[[], tuple[Completion, Completion]]
) -> str | None:
    """None when the batched greedy row equals the same request alone; a sentence starting with
    "stock" when stock differs the same way (the engine's batch variance, not the candidate's);
    else the problem. ``stock_pair``: stock's (batched, alone) output of this row, asked lazily."""
    at = same_output(got, alone)
    if at is None:
        return None
    stock_batched, stock_alone = stock_pair()
    if same_output(stock_batched, stock_alone) is not None:
        return f"stock too differs batched vs alone (candidate from token {at})"
    return (
        f"greedy output differs from the same request alone at token {at}: alone {alone.text[:40]!r}, "
        f"batched {got.text[:40]!r} (stock's is equal)"
    )


def sampled_tests(
    baseline: ProbeTarget, row: Row, outputs: Sequence[Completion], positions: int, seed: int
) -> list[tuple[dict[str, Any], Refiner | None]]:
    """The row's samples against its own expected distribution: stock's softmax(logits / T) with
    its top-p (the temperature probe's one-sample tests) where stock gives full distributions,
    else a two-sample test against the same row sent alone to stock."""
    r = row.request
    assert isinstance(r.prompt, str)
    samples = [c.token_ids for c in outputs]
    try:
        logprobs = baseline.next_token_logprobs(baseline.tokenize(r.prompt))[-1]
    except CapabilityMissing:
        logprobs = None
    if logprobs is not None:
        settings = TemperatureSettings(samples=r.n, seed=seed, positions=positions)
        found = _one_sample_tests(baseline, r.prompt, samples, settings, r.temperature, r.top_p)
        probs = expected_distribution(logprobs, r.temperature, r.top_p)
    else:
        reference = [c.token_ids for c in baseline.complete(replace(r, seed=(r.seed or 0) + REFERENCE_SEED_OFFSET))]
        found = two_sample_tests(reference, samples, positions, seed, r.temperature)
        counts = Counter(t[0] for t in reference if t)
        probs = np.array([v / max(1, sum(counts.values())) for v in counts.values()])
    leak = greedy_leak(probs, r.n)
    for entry, _ in found:
        if entry.get("position") == 0:
            entry.update(leak)
    return found


def greedy_leak(probs: np.ndarray, n: int) -> dict[str, Any]:
    """What a leaked greedy setting (every sample the modal token) looks like to a chi-square of
    the first position: noncentrality n (1 - p_max) / p_max, degrees of freedom the tokens with an
    expected count of at least 5, less one (for the probe's power, `mixed_batch.decide`)."""
    probs = np.asarray(probs, dtype=np.float64)
    top = float(probs.max()) if probs.size else 1.0
    df = max(1, int((probs * n >= 5).sum()) - 1)
    return {"leak_noncentrality": n * (1 - top) / top if top > 0 else 0.0, "leak_df": df}
