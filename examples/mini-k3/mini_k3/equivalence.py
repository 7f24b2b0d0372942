"""End-to-end equivalence of two engines' greedy outputs on the evaluation sets.

The rule is vLLM's ``check_logprobs_close``: identical token sequences agree; otherwise, at the
FIRST position where the greedy tokens differ, each side's token must be among the other side's
top-N logprobs at that position (a near-tie that flipped), and the comparison stops there (after
a divergence the contexts differ, so later tokens say nothing). Anything else is a violation.

Used by ``benchmarks/e2e_equivalence.py`` (whole sets, TP 1/2/4) and the fast slice in
``tests/test_e2e_equivalence.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mini_k3.data import mrcr

EVAL_DIR = Path(__file__).resolve().parents[1] / "data" / "eval"
IDENTICAL, WITHIN_RULE, VIOLATION = "identical", "within_rule", "violation"


@dataclass(frozen=True)
class EvalSet:
    """One shipped evaluation set: its file, how a row becomes chat messages, how long answers run."""

    name: str
    file: str
    messages_of: Callable[[dict[str, Any]], list[dict[str, str]]]
    max_tokens: int  # enough for the reference answers (evaluate_accuracy.MAX_NEW_TOKENS)


EVAL_SETS: dict[str, EvalSet] = {
    "mrcr": EvalSet("mrcr", "mrcr.jsonl", mrcr.messages_of, 96),
    "aime25": EvalSet("aime25", "aime25.jsonl", lambda r: [{"role": "user", "content": r["problem"]}], 640),
    "json": EvalSet("json", "json.jsonl", lambda r: [{"role": "user", "content": r["prompt"]}], 192),
}


def eval_prompts(tokenizer: Any, name: str, limit: int | None = None, data_dir: Path = EVAL_DIR) -> list[list[int]]:
    """The first ``limit`` rows (all when None) of set ``name``, rendered with the chat template."""
    spec = EVAL_SETS[name]
    lines = [line for line in (data_dir / spec.file).read_text().splitlines() if line.strip()]
    rows = [json.loads(line) for line in lines[:limit]]
    return [tokenizer.apply_chat_template(spec.messages_of(row), tokenize=True) for row in rows]


@dataclass(frozen=True)
class Comparison:
    verdict: str  # IDENTICAL, WITHIN_RULE or VIOLATION
    detail: str
    first_divergence: int | None = None


def logprobs_close(reference: Any, candidate: Any, top_n: int) -> Comparison:
    """Compare two `CompletionOutput`s (with per-token ``logprobs``, top-N included) by the rule."""
    for pos, (r_tok, c_tok) in enumerate(zip(reference.token_ids, candidate.token_ids)):
        if r_tok == c_tok:
            continue
        r_top = {t for t, _ in reference.logprobs[pos].top[:top_n]}
        c_top = {t for t, _ in candidate.logprobs[pos].top[:top_n]}
        if r_tok in c_top and c_tok in r_top:
            return Comparison(WITHIN_RULE, f"first divergence at token {pos}: {r_tok} vs {c_tok}, "
                                           f"each in the other's top-{top_n}", pos)
        return Comparison(VIOLATION, f"token {pos}: reference {r_tok} (in candidate top-{top_n}: {r_tok in c_top}) "
                                     f"vs candidate {c_tok} (in reference top-{top_n}: {c_tok in r_top})", pos)
    if len(reference.token_ids) != len(candidate.token_ids):
        # (stop tokens are part of token_ids, so this needs a stop string or different limits)
        shorter = min(len(reference.token_ids), len(candidate.token_ids))
        return Comparison(VIOLATION, f"lengths differ without a differing token: {len(reference.token_ids)} vs "
                                     f"{len(candidate.token_ids)}", shorter)
    return Comparison(IDENTICAL, "identical")


def length_batches(prompts: Sequence[Sequence[int]], max_tokens: int, batch_tokens: int,
                   max_batch: int = 64) -> list[list[int]]:
    """Prompt indices grouped by similar length, each group within ``batch_tokens`` cache slots."""
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        need = len(prompts[index]) + max_tokens  # sorted: this one is the longest so far
        if current and (need * (len(current) + 1) > batch_tokens or len(current) >= max_batch):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches
