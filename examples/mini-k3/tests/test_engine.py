"""The in-process engine on a tiny random-init model: batching, stops, n, logprobs, scoring."""

from __future__ import annotations

import pytest
import torch
from mini_k3.config import MiniK3Config
from mini_k3.engine import Engine, GenerationRequest, RequestError
from mini_k3.fasttrack_target import MiniK3Target
from mini_k3.model import MiniK3
from mini_k3.tokenizer import ByteTokenizer

TOKENIZER = ByteTokenizer()



def tiny_model(seed: int = 0) -> MiniK3:
    torch.manual_seed(seed)
    model = MiniK3(MiniK3Config.tiny())
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(4.0)  # weights far from the init scale: peaked, input-dependent outputs
    return model.eval()


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(model=tiny_model(), tokenizer=TOKENIZER)


def full_forward_logprobs(engine: Engine, ids: list[int]) -> torch.Tensor:
    """Reference: one causal forward without cache or padding."""
    with torch.no_grad():
        return torch.log_softmax(engine.model(torch.tensor([ids]))[0].float(), dim=-1)


def greedy(prompt: str, max_tokens: int = 10, **kw) -> GenerationRequest:
    return GenerationRequest(prompt, max_tokens=max_tokens, temperature=0.0, **kw)


def test_batched_greedy_equals_one_at_a_time(engine: Engine) -> None:
    prompts = ["a", "a longer prompt here", "mid size", "x" * 40]
    alone = [engine.generate([greedy(p)])[0].outputs[0].token_ids for p in prompts]
    together = [r.outputs[0].token_ids for r in engine.generate([greedy(p) for p in prompts])]
    assert together == alone
    assert all(len(t) == 10 for t in alone)


def test_greedy_cached_decode_equals_full_recompute(engine: Engine) -> None:
    prompt = TOKENIZER.encode("check the cache")
    tokens = list(engine.generate([greedy("check the cache", max_tokens=8)])[0].outputs[0].token_ids)
    ids = list(prompt)
    for expected in tokens:
        assert int(full_forward_logprobs(engine, ids)[-1].argmax()) == expected
        ids.append(expected)


def test_logprobs_equal_log_softmax_of_the_models_logits(engine: Engine) -> None:
    [result] = engine.generate([GenerationRequest("logprobs", max_tokens=6, temperature=1.0, seed=1, logprobs=3)])
    out = result.outputs[0]
    reference = full_forward_logprobs(engine, list(result.prompt_token_ids) + list(out.token_ids))
    offset = result.prompt_tokens - 1
    assert len(out.logprobs) == len(out.token_ids)
    for i, entry in enumerate(out.logprobs):
        row = reference[offset + i]
        assert entry.token_id == out.token_ids[i]
        assert entry.logprob == pytest.approx(float(row[entry.token_id]), abs=1e-4)
        top_values, top_ids = torch.topk(row, 3)
        assert [t for t, _ in entry.top] == top_ids.tolist()
        assert [v for _, v in entry.top] == pytest.approx(top_values.tolist(), abs=1e-4)


def test_prompt_logprobs_equal_teacher_forced_full_forward(engine: Engine) -> None:
    prompts = ["teacher forcing", "a second, longer prompt in the same batch"]
    results = engine.generate([GenerationRequest(p, max_tokens=1, temperature=0, prompt_logprobs=2) for p in prompts])
    for result in results:
        ids = list(result.prompt_token_ids)
        reference = full_forward_logprobs(engine, ids)
        assert result.prompt_logprobs[0] is None
        for t in range(1, len(ids)):
            assert result.prompt_logprobs[t].token_id == ids[t]
            assert result.prompt_logprobs[t].logprob == pytest.approx(float(reference[t - 1, ids[t]]), abs=1e-4)
        scored = engine.prompt_logprobs(ids)
        assert [e.logprob for e in scored[1:]] == pytest.approx([e.logprob for e in result.prompt_logprobs[1:]], abs=1e-4)


def test_next_token_logprobs_through_decode_match_prefill(engine: Engine) -> None:
    ids = TOKENIZER.encode("one pass or many steps")
    prefill = engine.next_token_logprobs(ids)
    stepwise = engine.next_token_logprobs(ids, through_decode=True)
    assert prefill.shape == (len(ids), engine.vocab_size)
    torch.testing.assert_close(stepwise, prefill, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(prefill, full_forward_logprobs(engine, ids), rtol=1e-4, atol=1e-4)


def test_score_is_the_sum_of_continuation_logprobs(engine: Engine) -> None:
    context, continuation = TOKENIZER.encode("2 + 2 ="), TOKENIZER.encode(" 4")
    total, is_greedy = engine.score(context, continuation)
    reference = full_forward_logprobs(engine, context + continuation)
    expected = sum(float(reference[len(context) - 1 + i, t]) for i, t in enumerate(continuation))
    assert total == pytest.approx(expected, abs=1e-4)
    greedy_tokens = list(engine.generate([greedy("2 + 2 =", max_tokens=2, ignore_eos=True)])[0].outputs[0].token_ids)
    assert engine.score(context, greedy_tokens)[1] is True
    assert is_greedy == (greedy_tokens == continuation)


def test_stop_string_cuts_the_text_before_it(engine: Engine) -> None:
    full = engine.generate([greedy("stop here", max_tokens=24, ignore_eos=True)])[0].outputs[0]
    text = full.text
    start = next(i for i in range(2, len(text) - 1) if "\ufffd" not in text[i : i + 2])
    stop = text[start : start + 2]
    out = engine.generate([greedy("stop here", max_tokens=24, ignore_eos=True, stop=("never appears", stop))])[0].outputs[0]
    assert out.finish_reason == "stop"
    assert out.text == text[: text.find(stop)]
    assert len(out.token_ids) < len(full.token_ids)
    assert full.finish_reason == "length"


def test_n_samples_are_reproducible_and_differ_from_each_other(engine: Engine) -> None:
    request = GenerationRequest("several", max_tokens=8, temperature=1.2, seed=7, n=4)
    first = engine.generate([request])[0]
    again = engine.generate([request])[0]
    assert [o.index for o in first.outputs] == [0, 1, 2, 3]
    assert [o.token_ids for o in first.outputs] == [o.token_ids for o in again.outputs]
    assert len({o.token_ids for o in first.outputs}) > 1
    greedy_n = engine.generate([greedy("several", max_tokens=8, n=3)])[0]
    assert len({o.token_ids for o in greedy_n.outputs}) == 1


def test_end_of_turn_token_stops_generation() -> None:
    model = tiny_model()
    with torch.no_grad():
        model.lm_head.weight[TOKENIZER.end_id].fill_(0.0)
        model.lm_head.weight[TOKENIZER.end_id, 0] = 1e4  # <|end|> wins whenever feature 0 > 0
    engine = Engine(model=model, tokenizer=TOKENIZER)
    outputs = [r.outputs[0] for r in engine.generate([greedy(p, max_tokens=30) for p in ["a", "bb", "ccc", "d d"]])]
    stopped = [o for o in outputs if o.finish_reason == "stop"]
    assert stopped, "no prompt reached the end-of-turn token"
    for o in stopped:
        assert o.token_ids[-1] == TOKENIZER.end_id and "<|end|>" not in o.text


def test_requests_that_cannot_be_served_raise_request_error(engine: Engine) -> None:
    bad = [
        GenerationRequest("x", max_tokens=-1),
        GenerationRequest("x", n=0),
        GenerationRequest("x", top_p=0.0),
        GenerationRequest("x", temperature=-1.0),
        GenerationRequest("", max_tokens=1),
        GenerationRequest([999], max_tokens=1),
        GenerationRequest("x" * 200, max_tokens=100),  # tiny config: 256 positions
    ]
    for request in bad:
        with pytest.raises(RequestError):
            engine.generate([request])
    assert engine.generate([greedy("still works", max_tokens=2)])[0].outputs[0].token_ids


def test_non_finite_logits_are_flagged_and_counted() -> None:
    model = tiny_model()
    with torch.no_grad():
        model.lm_head.weight[5, :] = float("nan")
    engine = Engine(model=model, tokenizer=TOKENIZER)
    [result] = engine.generate([greedy("broken", max_tokens=4)])
    assert result.non_finite_logits and result.outputs[0].finish_reason == "error"
    assert engine.stats.corrupted_requests == 1


def test_decode_steps_are_counted_on_the_stock_path(engine: Engine) -> None:
    before = engine.stats_snapshot()
    engine.generate([greedy("count", max_tokens=5, ignore_eos=True), greedy("me", max_tokens=3, ignore_eos=True)])
    after = engine.stats_snapshot()
    # The first token comes from the prefill; 4 more decode steps, 2 of them with both sequences.
    assert after.decode_steps_by_path["stock"] - before.decode_steps_by_path["stock"] == 4
    assert after.decode_steps_by_path["latency_specialized"] == 0
    by_batch = after.decode_steps_by_batch_size["stock"]
    old = before.decode_steps_by_batch_size.get("stock", {})
    assert by_batch[2] - old.get(2, 0) == 2 and by_batch[1] - old.get(1, 0) == 2


class StockOnlyModel(MiniK3):
    """A model without the latency_specialized switch (as mini-K3 was before it had one)."""

    def forward(self, input_ids, positions=None, cache=None, cache_rows=None):
        return super().forward(input_ids, positions, cache, cache_rows)


def test_options_a_model_cannot_honour_are_refused() -> None:
    stock_only = StockOnlyModel(MiniK3Config.tiny())
    with pytest.raises(ValueError, match="latency_specialized"):
        Engine(model=stock_only, tokenizer=TOKENIZER, latency_specialized=True)
    # refused before any rank starts: 4 ranks cannot split the tiny model's 2 heads
    with pytest.raises(ValueError, match="tensor_parallel_size 4 does not divide n_heads 2"):
        Engine(model=tiny_model(), tokenizer=TOKENIZER, tensor_parallel_size=4)
    with pytest.raises(ValueError):
        Engine(model=tiny_model(), tokenizer=TOKENIZER, speculative_draft_tokens=8)


def test_fasttrack_target_adapter(engine: Engine) -> None:
    target = MiniK3Target(engine)
    [result] = target.generate([{"prompt": "adapter", "max_tokens": 3, "temperature": 0, "stop": "zz"}])
    assert len(result.outputs[0].token_ids) <= 3
    [(total, _)] = target.loglikelihood([("2 + 2 =", " 4")])
    assert total == pytest.approx(engine.score(TOKENIZER.encode("2 + 2 ="), TOKENIZER.encode(" 4"))[0], abs=1e-5)
    rows = target.next_token_logprobs("abc")
    assert rows.shape == (3, engine.vocab_size)
    report = target.path_report()
    assert report["latency_specialized"] is False
    assert report["decode_steps_by_path"]["stock"] > 0
    assert set(report["speculative"]) >= {"drafts", "draft_tokens", "accepted_tokens", "mean_acceptance_length"}
    target.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_engine_matches_cpu() -> None:
    cpu = Engine(model=tiny_model(), tokenizer=TOKENIZER)
    cuda = Engine(model=tiny_model(), tokenizer=TOKENIZER, device="cuda")
    speculative = Engine(model=tiny_model(), tokenizer=TOKENIZER, device="cuda", speculative_draft_tokens=4)
    requests = [greedy(p, max_tokens=16, ignore_eos=True) for p in ["on the gpu", "abcabcabc", "x"]]
    expected = [r.outputs[0].token_ids for r in cpu.generate(requests)]
    assert [r.outputs[0].token_ids for r in cuda.generate(requests)] == expected
    assert [r.outputs[0].token_ids for r in speculative.generate(requests)] == expected
    ids = TOKENIZER.encode("compare the distributions")
    torch.testing.assert_close(cuda.next_token_logprobs(ids), cpu.next_token_logprobs(ids), rtol=1e-4, atol=1e-4)
    sampled = GenerationRequest("seeded", max_tokens=8, temperature=1.0, seed=5, n=2)
    first, again = cuda.generate([sampled])[0], cuda.generate([sampled])[0]
    assert [o.token_ids for o in first.outputs] == [o.token_ids for o in again.outputs]
    assert cuda.stats.decode_seconds > 0


def test_latency_specialized_switch_runs_and_counts_the_candidate_path() -> None:
    stock = Engine(model=tiny_model(), tokenizer=TOKENIZER)
    candidate = Engine(model=tiny_model(), tokenizer=TOKENIZER, latency_specialized=True)
    requests = [greedy(p, max_tokens=8, ignore_eos=True) for p in ["proof", "of path"]]
    assert [r.outputs[0].token_ids for r in candidate.generate(requests)] == \
        [r.outputs[0].token_ids for r in stock.generate(requests)]
    assert candidate.stats.decode_steps_by_path == {"stock": 0, "latency_specialized": 7}
    assert stock.stats.decode_steps_by_path == {"stock": 7, "latency_specialized": 0}
    assert candidate.stats.decode_steps_by_batch_size == {"latency_specialized": {2: 7}}


def test_scoring_reaches_the_last_position(engine: Engine) -> None:
    # max_position tokens need max_position cache slots (positions 0..max_position-1), not one more
    limit = engine.config.max_position
    assert engine.max_model_len == limit
    ids = (TOKENIZER.encode("the whole context ") * limit)[:limit]
    prefill = engine.next_token_logprobs(ids)
    assert prefill.shape == (limit, engine.vocab_size)
    torch.testing.assert_close(prefill, full_forward_logprobs(engine, ids), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(engine.next_token_logprobs(ids, through_decode=True), prefill, rtol=1e-4, atol=1e-4)
    with pytest.raises(RequestError, match="exceed the maximum context length"):
        engine.next_token_logprobs(ids + ids[:1])


def test_a_request_of_the_same_shape_reuses_the_zeroed_cache_and_sees_nothing_of_the_last() -> None:
    # The cache is reused across generate calls of one shape (CUDA graphs captured on it stay
    # valid); nothing of the previous request may leak into the next one through it.
    engine = Engine(model=tiny_model(), tokenizer=TOKENIZER)
    fresh = Engine(model=tiny_model(), tokenizer=TOKENIZER)
    later = [greedy(p, max_tokens=12, ignore_eos=True) for p in ["first row!", "second row"]]
    earlier = [greedy(p, max_tokens=12, ignore_eos=True) for p in ["zzzzzzzzzz", "qqqqqqqqqq"]]
    engine.generate(earlier)
    cache = engine.runner.cache
    assert bool(cache.c_kv.abs().sum() > 0)
    reused = [r.outputs[0].token_ids for r in engine.generate(later)]
    assert engine.runner.cache is cache, "a request of the same shape must get the same cache back"
    assert reused == [r.outputs[0].token_ids for r in fresh.generate(later)]
    engine.generate([greedy("a different batch size", max_tokens=12, ignore_eos=True)])
    assert engine.runner.cache is not cache
    # Back to the first shape (a benchmark alternates a full and a prefill-only request): its cache.
    assert [r.outputs[0].token_ids for r in engine.generate(later)] == reused
    assert engine.runner.cache is cache
