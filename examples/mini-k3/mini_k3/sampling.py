"""Turning one row of logits into the next token: temperature, top-p and seeded draws.

Every draw uses a uniform number taken from the request's own ``torch.Generator`` and an
inverse-CDF lookup on the CPU in float64, so the same seed gives the same tokens whatever the
batch composition and whatever device produced the logits. Greedy decoding (temperature 0)
draws nothing, so a greedy request never moves its generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

GREEDY_TEMPERATURE = 1e-5  # at or below this a request is decoded greedily


@dataclass(frozen=True)
class SamplingParams:
    """How one sequence picks its tokens."""

    temperature: float = 1.0
    top_p: float = 1.0

    @property
    def greedy(self) -> bool:
        return self.temperature <= GREEDY_TEMPERATURE


def make_generator(seed: int) -> torch.Generator:
    """A CPU generator owned by one sequence (CPU so draws do not depend on the device)."""
    generator = torch.Generator(device="cpu")
    generator.manual_seed(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)
    return generator


def sampling_probs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """The distribution a sampled token is drawn from: softmax(logits / T) cut to the top-p nucleus.

    ``logits`` is one row ``[V]``; the result is float64 on the CPU and sums to 1. Greedy params
    give a one-hot vector on the argmax, which lets speculative verification treat both cases alike.
    """
    row = logits.detach().to(device="cpu", dtype=torch.float64)
    if params.greedy:
        probs = torch.zeros_like(row)
        probs[int(torch.argmax(row))] = 1.0
        return probs
    probs = torch.softmax(row / params.temperature, dim=-1)
    if params.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        cumulative = torch.cumsum(sorted_probs, dim=-1)
        # Keep a token while the mass before it is still short of top_p: the smallest set whose
        # mass reaches top_p, always at least the most likely token.
        keep_sorted = (cumulative - sorted_probs) < params.top_p
        keep_sorted[0] = True
        keep = torch.zeros_like(keep_sorted)
        keep[order] = keep_sorted
        probs = torch.where(keep, probs, torch.zeros_like(probs))
        probs = probs / probs.sum()
    return probs


def draw_from(probs: torch.Tensor, generator: torch.Generator) -> int:
    """Inverse-CDF draw from a float64 CPU distribution with one uniform from ``generator``."""
    uniform = torch.rand((), generator=generator, dtype=torch.float64)
    cumulative = torch.cumsum(probs, dim=-1)
    index = int(torch.searchsorted(cumulative, uniform * cumulative[-1], right=True))
    index = min(index, probs.numel() - 1)
    # searchsorted can land on a zero-probability token at a float tie; step back to a real one.
    while probs[index] <= 0.0 and index > 0:
        index -= 1
    return index


def sample_token(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> int:
    """The next token for one sequence."""
    if params.greedy:
        return int(torch.argmax(logits))
    return draw_from(sampling_probs(logits, params), generator)


def log_softmax_rows(logits: torch.Tensor) -> torch.Tensor:
    """Model logprobs (of the raw logits, before temperature or masks), computed in float32."""
    return torch.log_softmax(logits.float(), dim=-1)


def top_logprobs(logprobs_row: torch.Tensor, k: int) -> list[tuple[int, float]]:
    """The ``k`` most likely tokens of one logprob row, most likely first."""
    if k <= 0:
        return []
    values, indices = torch.topk(logprobs_row, min(k, logprobs_row.numel()))
    return [(int(i), float(v)) for v, i in zip(values.tolist(), indices.tolist())]
