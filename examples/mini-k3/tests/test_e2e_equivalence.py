"""End to end: the latency path's greedy outputs on the evaluation sets match stock's.

Stock (``latency_specialized=False``) and candidate (``True``) engines answer the same items
with greedy decoding and top-N logprobs. They must agree by vLLM's ``check_logprobs_close`` rule
(`mini_k3.equivalence.logprobs_close`): identical token sequences pass; at the FIRST position
where the greedy tokens differ, each side's token must be among the other side's top-N
logprobs at that position, and the comparison stops there.

A slice of each evaluation set (MRCR, AIME-format, JSON), batched (decode batch > 1) and with
speculative decoding (draft length 4): always on a tiny random-init model (so the test cannot
silently skip everything), and with the shipped weights at TP 1 and TP 2 (slow). The whole sets
across TP 1/2/4 are run by ``benchmarks/e2e_equivalence.py``.
"""

from __future__ import annotations

import pytest
import torch
from mini_k3.config import MiniK3Config
from mini_k3.engine import CompletionOutput, Engine, GenerationRequest, TokenLogprob
from mini_k3.equivalence import (
    EVAL_SETS,
    IDENTICAL,
    VIOLATION,
    WITHIN_RULE,
    eval_prompts,
    length_batches,
    logprobs_close,
)
from mini_k3.model import WEIGHTS_DIR, MiniK3
from mini_k3.tokenizer import ByteTokenizer

TOP_N = 5
ITEMS_PER_SET = 2
MAX_TOKENS = 24


def slice_prompts(tokenizer: ByteTokenizer, max_prompt_tokens: int) -> list[list[int]]:
    """A few items of each evaluation set (long ones trimmed from the front to fit the context)."""
    return [ids[-max_prompt_tokens:] for name in EVAL_SETS for ids in eval_prompts(tokenizer, name, ITEMS_PER_SET)]


def tiny_model() -> MiniK3:
    torch.manual_seed(0)
    model = MiniK3(MiniK3Config.tiny(n_heads=4, max_position=512, vocab_size=264))
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(4.0)
    return model


def shipped_model() -> tuple[MiniK3, ByteTokenizer]:
    if not (WEIGHTS_DIR / "model.safetensors").exists():
        pytest.skip("no shipped weights (mini_k3/weights/model.safetensors); the tiny-model cases still run")
    from mini_k3.model import load_pretrained

    model, _config, tokenizer = load_pretrained()
    return model, tokenizer


def assert_equivalent(stock: Engine, candidate: Engine, prompts: list[list[int]]) -> None:
    requests = [GenerationRequest(prompt=p, max_tokens=MAX_TOKENS, temperature=0.0, logprobs=TOP_N) for p in prompts]
    stock_out = stock.generate(requests)
    cand_out = candidate.generate(requests)
    # the candidate really ran its path, the stock engine never did
    assert candidate.stats.decode_steps_by_path["latency_specialized"] > 0
    assert candidate.stats.decode_steps_by_path["stock"] == 0
    assert stock.stats.decode_steps_by_path["latency_specialized"] == 0
    verdicts = [logprobs_close(s.outputs[0], c.outputs[0], TOP_N) for s, c in zip(stock_out, cand_out)]
    failures = [f"item {i}: {v.detail}" for i, v in enumerate(verdicts) if v.verdict == VIOLATION]
    assert not failures, "; ".join(failures)
    identical = sum(v.verdict == IDENTICAL for v in verdicts)
    assert identical >= len(prompts) // 2, f"only {identical} of {len(prompts)} items identical"


@pytest.mark.parametrize("speculative", [0, 4], ids=["no-spec", "draft-4"])
def test_tiny_candidate_matches_stock_on_eval_items(speculative: int) -> None:
    model, tokenizer = tiny_model(), ByteTokenizer()
    stock, candidate = (Engine(model=model, tokenizer=tokenizer, latency_specialized=flag,
                               speculative_draft_tokens=speculative) for flag in (False, True))
    assert_equivalent(stock, candidate, slice_prompts(tokenizer, 400))


@pytest.mark.slow
@pytest.mark.parametrize("tp,speculative", [(1, 0), (1, 4), (2, 4)], ids=["tp1", "tp1-draft-4", "tp2-draft-4"])
def test_shipped_candidate_matches_stock_on_eval_items(tp: int, speculative: int) -> None:
    model, tokenizer = shipped_model()
    with Engine(model=model, tokenizer=tokenizer, tensor_parallel_size=tp, speculative_draft_tokens=speculative) as stock, \
            Engine(model=model, tokenizer=tokenizer, latency_specialized=True, tensor_parallel_size=tp,
                   speculative_draft_tokens=speculative) as candidate:
        assert_equivalent(stock, candidate, slice_prompts(tokenizer, 3000))


def _output(tokens, tops):
    return CompletionOutput(index=0, text="", token_ids=tuple(tokens), finish_reason="length",
                            logprobs=tuple(TokenLogprob(t, -0.1, tuple((x, -0.1) for x in top)) for t, top in zip(tokens, tops)))


def test_logprobs_close_rule():
    same = _output([1, 2, 3], [[1], [2], [3]])
    assert logprobs_close(same, same, 5).verdict == IDENTICAL
    # diverge at 1: each token in the other's top-N -> close, later tokens not compared
    a = _output([1, 2, 9], [[1], [2, 5], [9]])
    b = _output([1, 5, 7], [[1], [5, 2], [7]])
    close = logprobs_close(a, b, 5)
    assert (close.verdict, close.first_divergence) == (WITHIN_RULE, 1)
    # candidate's token is not in stock's top-N -> not close
    c = _output([1, 6, 7], [[1], [6, 2], [7]])
    assert logprobs_close(a, c, 5).verdict == VIOLATION
    # top-N is honoured: in the top-2 but not the top-1
    assert logprobs_close(a, b, 1).verdict == VIOLATION
    # one side shorter without a differing token (a stop string cut it) is not equivalent
    assert logprobs_close(a, _output([1, 2], [[1], [2]]), 5).verdict == VIOLATION


def test_length_batches_respect_the_budget_and_cover_every_prompt():
    prompts = [[0] * n for n in (50, 10, 30, 10, 90, 70)]
    batches = length_batches(prompts, max_tokens=10, batch_tokens=130, max_batch=3)
    assert sorted(i for b in batches for i in b) == list(range(len(prompts)))
    for batch in batches:
        assert len(batch) <= 3
        assert len(batch) == 1 or max(len(prompts[i]) + 10 for i in batch) * len(batch) <= 130
    # shortest first; the 4th prompt would exceed max_batch, the later ones the token budget
    assert batches == [[1, 3, 2], [0], [5], [4]]
