"""Timing one benchmark point: synthetic prompts, decode rate by difference, alternating runs."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from fasttrack.probes.base import CompletionRequest, ProbeTarget, TargetFailure
from fasttrack.probes.full_context import long_prompt

T = TypeVar("T")  # what one run measures (a rate, a vllm bench serve result)


def timed_pair(run_baseline: Callable[[], T], run_candidate: Callable[[], T], index: int) -> tuple[T, T]:
    """Pair ``index``: stock first in even pairs, the candidate first in odd ones (AB BA AB ...), so
    that a machine drifting one way (warming up, another job starting) favours neither side."""
    if index % 2 == 0:
        base = run_baseline()
        return base, run_candidate()
    cand = run_candidate()
    return run_baseline(), cand


def alternate(
    run_baseline: Callable[[], float], run_candidate: Callable[[], float], pairs: int
) -> tuple[list[float], list[float]]:
    """One untimed warm-up each, then ``pairs`` counterbalanced pairs (`timed_pair`)."""
    run_baseline()
    run_candidate()
    base, cand = [], []
    for index in range(pairs):
        b, c = timed_pair(run_baseline, run_candidate, index)
        base.append(b)
        cand.append(c)
    return base, cand


def decode_rate(target: ProbeTarget, prompts: Sequence[tuple[int, ...]], output_tokens: int) -> float:
    """Decode tokens/s per user for one batch (prefill excluded by difference)."""
    full = [CompletionRequest(p, max_tokens=output_tokens, temperature=0.0, ignore_eos=True) for p in prompts]
    first = [CompletionRequest(p, max_tokens=1, temperature=0.0, ignore_eos=True) for p in prompts]
    start = time.perf_counter()
    outputs = target.complete_batch(full)
    t_full = time.perf_counter() - start
    start = time.perf_counter()
    target.complete_batch(first)
    t_first = time.perf_counter() - start
    generated = min(len(o[0].token_ids) for o in outputs)
    if generated < output_tokens:
        raise TargetFailure(f"asked for {output_tokens} tokens with ignore_eos, got {generated}")
    decode_s = t_full - t_first
    if decode_s <= 0:
        decode_s = t_full  # prefill dominated the noise; fall back to the whole call (slower, conservative)
    return (output_tokens - 1) / decode_s


def synthetic_prompts(target: ProbeTarget, batch: int, input_tokens: int) -> list[tuple[int, ...]]:
    """``batch`` distinct prompts of exactly ``input_tokens`` tokens (shifted windows of filler text)."""
    ids = long_prompt(target, input_tokens + batch)
    return [tuple(ids[i : i + input_tokens]) for i in range(batch)]
