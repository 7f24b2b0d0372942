"""AIME 2025 for fasttrack, on top of lm-evaluation-harness's own ``aime`` task.

Grading is lm-eval's (``lm_eval.tasks.aime.utils.process_results``: the last ``\\boxed{}`` wins,
MATH-style string normalisation), imported rather than copied. What this adds:

* every repeat is scored: with ``repeats: k`` lm-eval's default filter keeps only the first
  response; the ``all_samples`` filter keeps all k and ``process_results`` averages their scores
  (the per-item mean that a paired, item-clustered comparison needs);
* ``doc_to_messages_json``: the problem as a one-message chat (the JSON message-list contract of
  ``checks/evals/mrcr/utils.py``), for models prompted through their chat template;
* ``doc_to_text_boxed``: lm-eval's prompt plus an instruction to end with ``\\boxed{}``.
"""

from __future__ import annotations

import json

from lm_eval.tasks.aime.utils import process_results as _grade_one

BOXED_INSTRUCTION = "Put your final answer within \\boxed{}."


def keep_all_responses(resps, docs):
    """lm-eval filter (``function: custom``): keep every repeat, not only the first."""
    return resps


def all_responses(results: list) -> list[str]:
    out: list[str] = []
    for r in results:
        out.extend([r] if isinstance(r, str) else list(r))
    return out


def doc_to_text_boxed(doc: dict) -> str:
    return f"Question: {doc['problem']}\n{BOXED_INSTRUCTION}\nAnswer:"


def doc_to_messages_json(doc: dict) -> str:
    return json.dumps([{"role": "user", "content": str(doc["problem"])}], ensure_ascii=False, separators=(",", ":"))


def process_results(doc: dict, results: list) -> dict[str, float]:
    """exact_match averaged over all repeats of the doc; exact_match_first for the first only."""
    responses = all_responses(results)
    scores = [float(_grade_one(doc, [r])["exact_match"]) for r in responses]
    return {"exact_match": sum(scores) / len(scores), "exact_match_first": scores[0]}
