"""Prompt-lookup (n-gram) speculative decoding: drafting, verification and acceptance statistics.

Drafts come from the sequence itself: find the latest earlier occurrence of the last few tokens
and propose the tokens that followed it. The model scores all drafted tokens in one forward pass.

Acceptance follows the standard speculative-sampling rule for a draft distribution ``q`` that is
a point mass on the drafted token ``d``: accept ``d`` with probability ``min(1, p(d)/q(d)) = p(d)``;
on rejection draw from ``normalise(max(0, p - q))``, which is ``p`` with ``d`` removed; when every
draft is accepted draw one bonus token from the next position. The emitted tokens are therefore
distributed exactly as plain sampling from ``p``. Greedy requests use a one-hot ``p``, where the
rule reduces to "accept while the draft equals the argmax" and draws no random numbers, so greedy
output is identical to decoding without speculation. (With temperature the tokens follow the same
distribution as plain decoding but not the same random stream, so a seeded sampled request gives
different, equally distributed, text with and without speculation.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from mini_k3.sampling import draw_from

MAX_DRAFT_TOKENS = 7


def propose_draft(tokens: Sequence[int], num_tokens: int, max_ngram: int = 3, min_ngram: int = 1) -> list[int]:
    """Up to ``num_tokens`` tokens that followed the latest earlier match of the sequence's suffix.

    Longer suffixes are tried first (they predict better); an empty list means no match.
    """
    if num_tokens <= 0:
        return []
    length = len(tokens)
    for n in range(min(max_ngram, length - 1), min_ngram - 1, -1):
        suffix = list(tokens[length - n :])
        # Latest match first: recent context predicts the continuation best.
        for start in range(length - n - 1, -1, -1):
            if list(tokens[start : start + n]) == suffix:
                follow = list(tokens[start + n : start + n + num_tokens])
                if follow:
                    return follow
    return []


def accept_draft(
    draft: Sequence[int],
    target_probs: Sequence[torch.Tensor],
    generator: torch.Generator | None,
) -> list[int]:
    """The tokens to emit after verifying ``draft``: the accepted prefix plus one more token.

    ``target_probs[i]`` is the target distribution (float64, CPU, sums to 1) of the token at draft
    position ``i``; ``target_probs[len(draft)]`` is the distribution after the whole draft. A
    ``generator`` of None means greedy (one-hot distributions, no random draws).
    """
    if len(target_probs) != len(draft) + 1:
        raise ValueError("need one target distribution per draft token plus one")
    emitted: list[int] = []
    for position, token in enumerate(draft):
        probs = target_probs[position]
        if generator is None:
            best = int(torch.argmax(probs))
            emitted.append(best)
            if best != token:
                return emitted
            continue
        accept_probability = float(probs[token])
        uniform = float(torch.rand((), generator=generator, dtype=torch.float64))
        if uniform < accept_probability:
            emitted.append(int(token))
            continue
        residual = probs.clone()
        residual[token] = 0.0
        if float(residual.sum()) <= 0.0:  # p was a point mass on the draft: cannot be rejected
            emitted.append(int(token))
            continue
        emitted.append(draw_from(residual / residual.sum(), generator))
        return emitted
    bonus = target_probs[len(draft)]
    emitted.append(int(torch.argmax(bonus)) if generator is None else draw_from(bonus, generator))
    return emitted


@dataclass
class SpeculativeStats:
    """Counters in the same sense as vLLM's spec-decode metrics."""

    drafts: int = 0  # verification steps that had at least one drafted token
    draft_tokens: int = 0  # drafted tokens proposed
    accepted_tokens: int = 0  # drafted tokens accepted

    def record(self, num_drafted: int, num_accepted: int) -> None:
        if num_drafted > 0:
            self.drafts += 1
            self.draft_tokens += num_drafted
            self.accepted_tokens += num_accepted

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else 0.0

    @property
    def mean_acceptance_length(self) -> float:
        """Tokens emitted per drafting step: accepted drafts plus the one verified token."""
        return 1.0 + self.accepted_tokens / self.drafts if self.drafts else 0.0
