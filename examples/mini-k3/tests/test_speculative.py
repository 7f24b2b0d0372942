"""Prompt-lookup speculative decoding: drafting, exact greedy equality, unbiased acceptance."""

from __future__ import annotations

import pytest
import torch
from mini_k3.config import MiniK3Config
from mini_k3.engine import Engine, GenerationRequest
from mini_k3.model import MiniK3
from mini_k3.sampling import make_generator
from mini_k3.speculative import SpeculativeStats, accept_draft, propose_draft
from mini_k3.tokenizer import ByteTokenizer
from scipy.stats import chisquare

TOKENIZER = ByteTokenizer()
PROMPTS = ["abcabcabcabcabc", "the cat sat on the mat; the cat sat on the", "1 2 3 1 2 3 1 2", "xyz"]



def test_draft_continues_the_latest_match_of_the_longest_suffix() -> None:
    tokens = [1, 2, 3, 9, 1, 2, 3, 4, 5, 1, 2, 3]
    assert propose_draft(tokens, 2) == [4, 5]  # latest [1, 2, 3] was followed by 4, 5
    assert propose_draft(tokens, 7) == [4, 5, 1, 2, 3]  # runs up to the end of the sequence
    assert propose_draft([5, 6, 7], 3) == []  # no earlier occurrence of any suffix
    assert propose_draft([7, 7], 3) == [7]
    assert propose_draft(tokens, 0) == []


def test_greedy_acceptance_keeps_the_agreeing_prefix_then_the_correction() -> None:
    def one_hot(i: int) -> torch.Tensor:
        p = torch.zeros(5, dtype=torch.float64)
        p[i] = 1.0
        return p

    targets = [one_hot(1), one_hot(2), one_hot(4), one_hot(0)]
    assert accept_draft([1, 2, 3], targets, None) == [1, 2, 4]
    assert accept_draft([1, 2, 4], targets, None) == [1, 2, 4, 0]  # all accepted plus the bonus
    assert accept_draft([3, 2, 4], targets, None) == [1]


def test_sampled_acceptance_emits_tokens_distributed_as_the_target() -> None:
    # Whatever the draft, the first emitted token must follow p exactly (speculative sampling).
    p = torch.tensor([0.45, 0.25, 0.15, 0.1, 0.05], dtype=torch.float64)
    bonus = torch.full((5,), 0.2, dtype=torch.float64)
    draws = 5000
    generator = make_generator(0)
    counts = torch.zeros(5)
    for _ in range(draws):
        counts[accept_draft([2], [p, bonus], generator)[0]] += 1
    assert chisquare(counts.numpy(), (p * draws).numpy()).pvalue > 1e-3


def test_stats_report_mean_acceptance_length() -> None:
    stats = SpeculativeStats()
    stats.record(num_drafted=4, num_accepted=3)
    stats.record(num_drafted=2, num_accepted=0)
    stats.record(num_drafted=0, num_accepted=0)  # no draft: not a drafting step
    assert (stats.drafts, stats.draft_tokens, stats.accepted_tokens) == (2, 6, 3)
    assert stats.mean_acceptance_length == pytest.approx(2.5)
    assert stats.acceptance_rate == pytest.approx(0.5)


@pytest.fixture(scope="module")
def model() -> MiniK3:
    torch.manual_seed(1)
    model = MiniK3(MiniK3Config.tiny())
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(4.0)
    return model.eval()


@pytest.fixture(scope="module")
def plain_outputs(model: MiniK3) -> list[tuple[int, ...]]:
    engine = Engine(model=model, tokenizer=TOKENIZER)
    requests = [GenerationRequest(p, max_tokens=40, temperature=0.0, ignore_eos=True) for p in PROMPTS]
    return [r.outputs[0].token_ids for r in engine.generate(requests)]


@pytest.mark.parametrize("draft_tokens", range(1, 8))
def test_speculative_greedy_output_is_identical(model: MiniK3, plain_outputs, draft_tokens: int) -> None:
    engine = Engine(model=model, tokenizer=TOKENIZER, speculative_draft_tokens=draft_tokens)
    requests = [GenerationRequest(p, max_tokens=40, temperature=0.0, ignore_eos=True) for p in PROMPTS]
    outputs = [r.outputs[0].token_ids for r in engine.generate(requests)]
    assert outputs == plain_outputs
    stats = engine.stats.speculative
    assert stats.drafts > 0 and stats.accepted_tokens > 0
    assert stats.mean_acceptance_length > 1.0
    assert stats.draft_tokens <= stats.drafts * draft_tokens
    # Fewer forward passes than tokens: accepted drafts saved decode steps.
    assert engine.stats.decode_steps_by_path["stock"] < sum(len(o) for o in outputs) - len(outputs)


def test_speculative_sampling_respects_max_tokens_and_seed(model: MiniK3) -> None:
    engine = Engine(model=model, tokenizer=TOKENIZER, speculative_draft_tokens=5)
    request = GenerationRequest(PROMPTS[0], max_tokens=17, temperature=0.7, seed=3, ignore_eos=True, n=3)
    first = engine.generate([request])[0]
    again = engine.generate([request])[0]
    assert all(len(o.token_ids) == 17 for o in first.outputs)
    assert [o.token_ids for o in first.outputs] == [o.token_ids for o in again.outputs]


def test_speculation_up_to_the_last_position_of_the_context(model: MiniK3) -> None:
    limit = model.config.max_position  # 256 in the tiny config
    prompts = [list(range(100, 160)) * 3, [7, 8, 9] * 10]
    requests = [GenerationRequest(prompts[0], max_tokens=limit - len(prompts[0]), temperature=0.0, ignore_eos=True),
                GenerationRequest(prompts[1], max_tokens=40, temperature=0.0, ignore_eos=True)]
    plain = Engine(model=model, tokenizer=TOKENIZER).generate(requests)
    speculative = Engine(model=model, tokenizer=TOKENIZER, speculative_draft_tokens=7).generate(requests)
    assert [r.outputs[0].token_ids for r in speculative] == [r.outputs[0].token_ids for r in plain]
    assert len(plain[0].outputs[0].token_ids) == limit - len(prompts[0])
