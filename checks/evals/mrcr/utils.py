"""OpenAI MRCR (multi-round co-reference resolution) for lm-evaluation-harness.

Rows (dataset ``openai/mrcr``): ``prompt`` is a JSON string holding a list of chat messages whose
last user turn asks the model to prepend ``random_string_to_prepend`` to the k-th instance of one
request that occurs ``n_needles`` (2, 4 or 8) times; ``answer`` is that string followed by the
requested earlier assistant message. ``n_chars`` is the prompt's length in characters.

Grading is OpenAI's rule: a response that does not start with the random string scores 0;
otherwise the string is removed from both response and answer and the score is
``difflib.SequenceMatcher(None, response, answer).ratio()``.

Prompt rendering (lm-eval contexts are strings): the ``mrcr*`` tasks pass the conversation as its
JSON message list (``doc_to_messages_json``), for LMs that accept chat messages and render them
with the model's own chat template (fasttrack's adapters do; so can any ``LM`` subclass whose
``generate_until`` recognises a JSON list of ``{"role", "content"}`` objects). The ``mrcr_text*``
tasks render a plain transcript (``doc_to_text``) for completion models without chat support.
"""

from __future__ import annotations

import difflib
import itertools
import json

# Length bins on the prompt's character count, powers of two from 1k to 4M characters (the
# dataset's prompts reach ~1M tokens, ~4M characters). The names are the metric suffixes declared
# in the task YAML; the edges are the lower bounds.
_K = 1024
LENGTH_BIN_EDGES = (0, *(_K * 2**i for i in range(13)))  # 0, 1k, 2k, ..., 4M
NEEDLE_COUNTS = (2, 4, 8)
ROLES = ("system", "user", "assistant")


def _size(n: int) -> str:
    return f"{n // (_K * _K)}m" if n >= _K * _K else f"{n // _K}k"


def length_bin(n_chars: int) -> str:
    """The metric suffix of a prompt length, e.g. ``chars_2k_4k`` or ``chars_4m_up``."""
    edges = LENGTH_BIN_EDGES
    for lo, hi in itertools.pairwise(edges):
        if lo <= n_chars < hi:
            return f"chars_{_size(lo) if lo else '0'}_{_size(hi)}"
    return f"chars_{_size(edges[-1])}_up"


def messages(doc: dict) -> list[dict[str, str]]:
    """The conversation of a row, validated: a non-empty list of {role, content} messages."""
    raw = doc["prompt"]
    msgs = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(msgs, list) or not msgs:
        raise ValueError("MRCR prompt must be a non-empty JSON list of messages")
    for m in msgs:
        if not (isinstance(m, dict) and m.get("role") in ROLES and isinstance(m.get("content"), str)):
            raise ValueError(f"MRCR prompt has a malformed message: {m!r:.120}")
    return [{"role": m["role"], "content": m["content"]} for m in msgs]


def doc_to_messages_json(doc: dict) -> str:
    """The conversation as a compact JSON message list (rendered by the LM's chat template)."""
    return json.dumps(messages(doc), ensure_ascii=False, separators=(",", ":"))


def doc_to_text(doc: dict) -> str:
    """The conversation as a plain transcript, ending with an open assistant turn."""
    turns = [f"{m['role'].capitalize()}: {m['content']}" for m in messages(doc)]
    return "\n\n".join(turns) + "\n\nAssistant:"


def grade(response: str, answer: str, random_string_to_prepend: str) -> float:
    """OpenAI's MRCR grade (see module docstring)."""
    if not response.startswith(random_string_to_prepend):
        return 0.0
    response = response.removeprefix(random_string_to_prepend)
    answer = answer.removeprefix(random_string_to_prepend)
    return float(difflib.SequenceMatcher(None, response, answer).ratio())


def keep_all_responses(resps, docs):
    """lm-eval filter (``function: custom``): keep every repeat, not only the first."""
    return resps


def all_responses(results: list) -> list[str]:
    """The responses of one doc: ``[r]`` without filter, ``[[r1, ..., rk]]`` with keep_all_responses."""
    out: list[str] = []
    for r in results:
        out.extend([r] if isinstance(r, str) else list(r))
    return out


def process_results(doc: dict, results: list) -> dict[str, float]:
    """Grade every response of the doc (repeats included) and report the mean.

    Besides ``grade`` the doc contributes to one length-bin metric and one needle-count metric;
    lm-eval averages each metric over the docs that report it.
    """
    responses = all_responses(results)
    # a generation prompt's leading space/newline is not part of the answer
    scores = [grade(r.lstrip(), doc["answer"], doc["random_string_to_prepend"]) for r in responses]
    score = sum(scores) / len(scores)
    out = {"grade": score, f"grade_{length_bin(int(doc['n_chars']))}": score}
    n = int(doc["n_needles"])
    if n in NEEDLE_COUNTS:
        out[f"grade_{n}needle"] = score
    return out
