"""Deterministic fake targets and small MRCR/AIME-format data sets for the eval tests.

``FakeTarget`` answers MRCR rows by actually solving them (find the k-th matching request and copy
the answer after it) and AIME-format rows by evaluating the sum in the problem. A planted bug
(``break_after_chars``) corrupts only answers whose rendered prompt is longer than a threshold —
a kernel bug that short inputs never reach.
"""

from __future__ import annotations

import json
import math
import random
import re
import string
from pathlib import Path

FORMS = ("poem", "story", "riddle", "song", "letter", "joke")
TOPICS = ("tapirs", "otters", "comets", "violins", "castles", "rivers", "puffins", "robots", "maps", "kites")
WORDS = ("amber", "birch", "cobalt", "drift", "ember", "gleam", "hollow", "ivory", "kettle", "lumen", "onyx", "quill")


def mrcr_row(rng: random.Random, n_pairs: int, n_needles: int) -> dict:
    asks = [(f, t) for f in FORMS for t in TOPICS]
    rng.shuffle(asks)
    needle, others = asks[0], iter(asks[1:])
    slots = sorted(rng.sample(range(n_pairs), n_needles))
    msgs, needle_answers = [], []
    for i in range(n_pairs):
        form, topic = needle if i in slots else next(others)
        answer = f"{form} about {topic}: " + " ".join(rng.choice(WORDS) for _ in range(5))
        msgs += [{"role": "user", "content": f"write a {form} about {topic}"}, {"role": "assistant", "content": answer}]
        if i in slots:
            needle_answers.append((len(msgs) - 1, answer))
    k = rng.randint(1, n_needles)
    secret = "".join(rng.choice(string.ascii_letters) for _ in range(10))
    msgs.append(
        {
            "role": "user",
            "content": f"Prepend {secret} to the {k}th (1 indexed) {needle[0]} about {needle[1]}. "
            "Do not include any other text in your response.",
        }
    )
    idx, answer = needle_answers[k - 1]
    return {
        "prompt": json.dumps(msgs),
        "answer": secret + answer,
        "random_string_to_prepend": secret,
        "n_needles": n_needles,
        "desired_msg_index": idx,
        "total_messages": len(msgs),
        "n_chars": sum(len(m["content"]) for m in msgs),
    }


def write_mrcr(path: Path, n: int, seed: int = 0) -> Path:
    """n rows; prompt sizes spread evenly from ~300 to ~3000 characters."""
    rng = random.Random(seed)
    rows = [mrcr_row(rng, 9 + (i * 37) % 40, (2, 4, 8)[i % 3]) for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_aime(path: Path, n: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        terms = [rng.randint(1, 999) for _ in range(rng.randint(3, 6))]
        rows.append(
            {"problem": f"Let S = {' + '.join(map(str, terms))}. Find S mod 1000.", "answer": sum(terms) % 1000}
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def aime_config(data: Path, **overrides: object) -> dict:
    """The evals kind's config for a local AIME25 file of ``write_aime``: 40 items, greedy."""
    base = {
        "id": "aime",
        "task": "aime25_local",
        "task_dir": "checks/evals/aime25",
        "data_files": str(data),
        "metric": "exact_match",
        "margin": 0.05,
        "alpha": 0.05,
        "limit": 40,
        "generation": {"temperature": 0.0, "max_tokens": 64, "seed": 7},
    }
    return {**base, **overrides}


def solve_mrcr(msgs: list[dict]) -> str:
    m = re.match(r"Prepend (\S+) to the (\d+)\S* \(1 indexed\) (.+?)\. Do not", msgs[-1]["content"])
    if not m:
        return "I do not know"
    secret, k, ask = m.group(1), int(m.group(2)), m.group(3)
    hits = [
        msgs[i + 1]["content"]
        for i in range(len(msgs) - 1)
        if msgs[i]["role"] == "user" and msgs[i]["content"] == f"write a {ask}"
    ]
    return secret + hits[k - 1] if len(hits) >= k else secret


def solve_aime(prompt: str, rng: random.Random, skill: float) -> str:
    m = re.search(r"S = ([\d + ]+)\.", prompt)
    if not m:
        return "no idea"
    value = sum(int(t) for t in m.group(1).split("+")) % 1000
    if rng.random() > skill:
        value = (value + 1) % 1000
    return f"Adding up gives {value}, so the answer is \\boxed{{{value}}}."


class FakeTarget:
    """A deterministic stand-in for an in-process target (the example engine's interface)."""

    def __init__(
        self,
        *,
        break_after_chars: int | None = None,
        non_finite_every: int | None = None,
        aime_skill: float = 0.7,
        template: str = "<|{role}|>{content}",
    ):
        self.break_after_chars = break_after_chars
        self.non_finite_every = non_finite_every
        self.aime_skill = aime_skill
        self.template = template
        self.calls = 0
        self.seen: list[dict] = []  # every request, as the adapter sent it

    def apply_chat_template(self, messages: list[dict]) -> str:
        return json.dumps({"t": self.template, "m": messages})

    def generate(self, requests: list[dict]) -> list[dict]:
        out = []
        for r in requests:
            self.calls += 1
            self.seen.append(dict(r))
            prompt = r["prompt"]
            rng = random.Random(f"{prompt}|{r['seed']}")  # deterministic per prompt and seed
            try:
                msgs = json.loads(prompt)["m"]
            except (ValueError, KeyError, TypeError):
                msgs = None
            if msgs and msgs[-1]["content"].startswith("Prepend"):
                text = solve_mrcr(msgs)
                if self.break_after_chars is not None and len(prompt) > self.break_after_chars:
                    text = text[:10] + "".join(rng.choice(WORDS) + " " for _ in range(6))  # garbled recall
            else:
                text = solve_aime(prompt if msgs is None else msgs[-1]["content"], rng, self.aime_skill)
            bad = self.non_finite_every is not None and self.calls % self.non_finite_every == 0
            out.append({"text": text, "non_finite_logits": bad})
        return out

    # teacher-forced distributions for the divergence check: a smooth fake "model"
    vocab = 16

    def next_token_logprobs(self, tokens):
        import numpy as np

        ids = list(tokens) if not isinstance(tokens, str) else [ord(c) % self.vocab for c in tokens]
        logits = np.zeros((len(ids), self.vocab))
        for t, tok in enumerate(ids):
            logits[t] = np.cos(np.arange(self.vocab) * (tok + 1) * 0.37) * 3.0
            if self.break_after_chars is not None and t >= self.break_after_chars:
                logits[t] = logits[t][::-1] * 1.5  # the planted bug: far positions see another distribution
        logits -= logits.max(axis=1, keepdims=True)
        return logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))


def is_close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def create(latency_specialized: bool = False, break_after_chars: int | None = None, **_options) -> FakeTarget:
    """Target factory for manifests: the planted bug is live only on the switched-on (candidate) path."""
    return FakeTarget(break_after_chars=break_after_chars if latency_specialized else None)
