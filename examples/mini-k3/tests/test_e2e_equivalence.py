"""End to end: the latency path's greedy outputs on the evaluation sets match stock's.

Stock (``latency_specialized=False``) and candidate (``True``) engines answer the same items
with greedy decoding and top-N logprobs. They must agree by vLLM's ``check_logprobs_close`` rule
(implemented here, `logprobs_close`): identical token sequences pass; at the FIRST position
where the greedy tokens differ, each side's token must be among the other side's top-N
logprobs at that position, and the comparison stops there (after a divergence the contexts
differ, so later tokens are not comparable).

Runs on a few items of each evaluation set (MRCR, AIME-format), batched (decode batch > 1)
and with speculative decoding (draft length 4), with the shipped weights when they exist, and
always on a tiny random-init model (so the test cannot silently skip everything).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from mini_k3.config import MiniK3Config
from mini_k3.engine import CompletionOutput, Engine, GenerationRequest
from mini_k3.model import WEIGHTS_DIR, MiniK3
from mini_k3.tokenizer import ByteTokenizer

DATA = Path(__file__).resolve().parents[1] / "data" / "eval"
TOP_N = 5
ITEMS_PER_SET = 3
MAX_TOKENS = 24


def logprobs_close(stock: CompletionOutput, candidate: CompletionOutput, top_n: int) -> tuple[bool, str]:
    """vLLM's rule: equal, or at the first differing position each token is in the other's top-N."""
    for pos, (s_tok, c_tok) in enumerate(zip(stock.token_ids, candidate.token_ids)):
        if s_tok == c_tok:
            continue
        s_top = {t for t, _ in stock.logprobs[pos].top[:top_n]}
        c_top = {t for t, _ in candidate.logprobs[pos].top[:top_n]}
        if s_tok in c_top and c_tok in s_top:
            return True, f"first divergence at token {pos}: {s_tok} vs {c_tok}, each in the other's top-{top_n}"
        return False, (f"token {pos}: stock {s_tok} (in candidate top-{top_n}: {s_tok in c_top}) vs candidate "
                       f"{c_tok} (in stock top-{top_n}: {c_tok in s_top})")
    if len(stock.token_ids) != len(candidate.token_ids):
        # one side stopped where the other went on: its stop token was its greedy choice there
        return False, f"lengths differ without a differing token: {len(stock.token_ids)} vs {len(candidate.token_ids)}"
    return True, "identical"


def eval_prompts(tokenizer: ByteTokenizer, max_prompt_tokens: int) -> list[list[int]]:
    """A few items of each evaluation set, rendered with the chat template (long ones trimmed
    from the front so the random-init model's small context fits)."""
    prompts = []
    for name, to_messages in (("mrcr.jsonl", lambda r: json.loads(r["prompt"])),
                              ("aime25.jsonl", lambda r: [{"role": "user", "content": r["problem"]}])):
        rows = [json.loads(line) for line in (DATA / name).read_text().splitlines()[:ITEMS_PER_SET]]
        for row in rows:
            ids = tokenizer.apply_chat_template(to_messages(row), tokenize=True)
            prompts.append(ids[-max_prompt_tokens:])
    return prompts


def tiny_engines(speculative: int) -> tuple[Engine, Engine]:
    torch.manual_seed(0)
    model = MiniK3(MiniK3Config.tiny(n_heads=4, max_position=512, vocab_size=264))
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(4.0)
    tokenizer = ByteTokenizer()
    return tuple(Engine(model=model, tokenizer=tokenizer, latency_specialized=flag, speculative_draft_tokens=speculative)
                 for flag in (False, True))


def shipped_engines(speculative: int) -> tuple[Engine, Engine]:
    if not (WEIGHTS_DIR / "model.safetensors").exists():
        pytest.skip("no shipped weights yet (mini_k3/weights/model.safetensors); the tiny-model cases still run")
    stock = Engine(speculative_draft_tokens=speculative)
    candidate = Engine(model=stock.model, tokenizer=stock.tokenizer, latency_specialized=True,
                       speculative_draft_tokens=speculative)
    return stock, candidate


@pytest.mark.parametrize("speculative", [0, 4], ids=["no-spec", "draft-4"])
@pytest.mark.parametrize("which", ["tiny", pytest.param("shipped", marks=pytest.mark.slow)])
def test_candidate_matches_stock_on_eval_items(which, speculative):
    stock, candidate = (tiny_engines if which == "tiny" else shipped_engines)(speculative)
    prompts = eval_prompts(stock.tokenizer, 400 if which == "tiny" else 3000)
    requests = [GenerationRequest(prompt=p, max_tokens=MAX_TOKENS, temperature=0.0, logprobs=TOP_N) for p in prompts]
    stock_out = stock.generate(requests)
    cand_out = candidate.generate(requests)
    # the candidate really ran its path, the stock engine never did
    assert candidate.stats.decode_steps_by_path["latency_specialized"] > 0
    assert stock.stats.decode_steps_by_path["latency_specialized"] == 0
    failures, identical = [], 0
    for i, (s, c) in enumerate(zip(stock_out, cand_out)):
        ok, why = logprobs_close(s.outputs[0], c.outputs[0], TOP_N)
        identical += why == "identical"
        if not ok:
            failures.append(f"item {i}: {why}")
    assert not failures, "; ".join(failures)
    assert identical >= len(prompts) // 2, f"only {identical} of {len(prompts)} items identical"


def _output(tokens, tops):
    from mini_k3.engine import TokenLogprob

    return CompletionOutput(index=0, text="", token_ids=tuple(tokens), finish_reason="length",
                            logprobs=tuple(TokenLogprob(t, -0.1, tuple((x, -0.1) for x in top)) for t, top in zip(tokens, tops)))


def test_logprobs_close_rule():
    same = _output([1, 2, 3], [[1], [2], [3]])
    assert logprobs_close(same, same, 5) == (True, "identical")
    # diverge at 1: each token in the other's top-N -> close, later tokens not compared
    a = _output([1, 2, 9], [[1], [2, 5], [9]])
    b = _output([1, 5, 7], [[1], [5, 2], [7]])
    assert logprobs_close(a, b, 5)[0]
    # candidate's token is not in stock's top-N -> not close
    c = _output([1, 6, 7], [[1], [6, 2], [7]])
    assert not logprobs_close(a, c, 5)[0]
    # top-N is honoured: in the top-2 but not the top-1
    assert not logprobs_close(a, b, 1)[0]
