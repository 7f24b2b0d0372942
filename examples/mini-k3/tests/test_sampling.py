"""Sampling: temperature and top-p give the intended distributions; seeds reproduce draws."""

from __future__ import annotations

import pytest
import torch
from mini_k3.config import MiniK3Config
from mini_k3.engine import Engine, GenerationRequest
from mini_k3.model import MiniK3
from mini_k3.sampling import (
    SamplingParams,
    make_generator,
    sample_token,
    sampling_probs,
)
from mini_k3.tokenizer import ByteTokenizer
from scipy.stats import chisquare

LOGITS = torch.tensor([2.0, 1.5, 1.0, 0.2, -0.5, -1.0, -3.0, 0.7])
DRAWS = 6000



def nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Reference top-p: keep the most likely tokens until their mass reaches top_p."""
    order = torch.argsort(probs, descending=True)
    kept, mass = [], 0.0
    for index in order.tolist():
        kept.append(index)
        mass += float(probs[index])
        if mass >= top_p:
            break
    out = torch.zeros_like(probs)
    out[kept] = probs[kept]
    return out / out.sum()


def draw_counts(params: SamplingParams, seed: int = 0) -> torch.Tensor:
    generator = make_generator(seed)
    counts = torch.zeros(len(LOGITS))
    for _ in range(DRAWS):
        counts[sample_token(LOGITS, params, generator)] += 1
    return counts


@pytest.mark.parametrize("temperature", [0.5, 1.0, 1.7])
def test_temperature_samples_follow_softmax_of_scaled_logits(temperature: float) -> None:
    expected = torch.softmax(LOGITS.double() / temperature, dim=-1)
    counts = draw_counts(SamplingParams(temperature=temperature))
    result = chisquare(counts.numpy(), (expected * DRAWS).numpy())
    assert result.pvalue > 1e-3, (counts, expected * DRAWS)


def test_wrong_temperature_is_detected_by_the_same_test() -> None:
    # The test has power: samples at T=1 do not pass as samples at T=0.5.
    expected = torch.softmax(LOGITS.double() / 0.5, dim=-1)
    counts = draw_counts(SamplingParams(temperature=1.0))
    assert chisquare(counts.numpy(), (expected * DRAWS).numpy()).pvalue < 1e-6


@pytest.mark.parametrize("top_p", [0.5, 0.8, 0.95])
def test_top_p_samples_only_the_nucleus_with_renormalised_probabilities(top_p: float) -> None:
    expected = nucleus(torch.softmax(LOGITS.double() / 0.9, dim=-1), top_p)
    assert torch.allclose(sampling_probs(LOGITS, SamplingParams(0.9, top_p)), expected)
    counts = draw_counts(SamplingParams(temperature=0.9, top_p=top_p))
    support = expected > 0
    assert counts[~support].sum() == 0
    result = chisquare(counts[support].numpy(), (expected[support] * DRAWS).numpy())
    assert result.pvalue > 1e-3


def test_greedy_takes_the_argmax_and_draws_no_random_numbers() -> None:
    generator = make_generator(5)
    state = generator.get_state()
    assert sample_token(LOGITS, SamplingParams(temperature=0.0), generator) == 0
    assert torch.equal(generator.get_state(), state)


def test_same_seed_same_draws_other_seed_other_draws() -> None:
    params = SamplingParams(temperature=1.0)
    first = [sample_token(LOGITS, params, g) for g in [make_generator(11)] for _ in range(50)]
    again = [sample_token(LOGITS, params, g) for g in [make_generator(11)] for _ in range(50)]
    other = [sample_token(LOGITS, params, g) for g in [make_generator(12)] for _ in range(50)]
    assert first == again
    assert first != other


@pytest.fixture(scope="module")
def engine() -> Engine:
    torch.manual_seed(0)
    model = MiniK3(MiniK3Config.tiny())
    with torch.no_grad():
        model.lm_head.weight.mul_(60.0)  # a peaked first-token distribution, far from uniform
    return Engine(model=model, tokenizer=ByteTokenizer())


def test_engine_first_tokens_follow_the_models_tempered_softmax(engine: Engine) -> None:
    prompt = "The answer is"
    temperature = 0.8
    [result] = engine.generate([GenerationRequest(prompt, max_tokens=1, temperature=temperature, seed=3, n=3000)])
    drawn = torch.tensor([o.token_ids[0] for o in result.outputs])
    ids = torch.tensor([ByteTokenizer().encode(prompt)])
    with torch.no_grad():
        logits = engine.model(ids)[0, -1].double()
    expected = torch.softmax(logits / temperature, dim=-1) * len(drawn)
    counts = torch.bincount(drawn, minlength=len(expected)).double()
    # Pool the rare tokens (expected count < 5) into one category, as the chi-square test needs.
    common = expected >= 5
    observed = torch.cat([counts[common], counts[~common].sum().unsqueeze(0)])
    wanted = torch.cat([expected[common], expected[~common].sum().unsqueeze(0)])
    assert common.sum() >= 3, "the distribution is too flat for a meaningful test"
    assert chisquare(observed.numpy(), wanted.numpy()).pvalue > 1e-3


def test_seeded_request_is_reproducible_whatever_the_batch(engine: Engine) -> None:
    request = GenerationRequest("hello", max_tokens=12, temperature=1.0, top_p=0.9, seed=42)
    alone = engine.generate([request])[0].outputs[0].token_ids
    others = [GenerationRequest("a much longer prompt than the other one", max_tokens=5, temperature=1.0, seed=s)
              for s in range(3)]
    batched = engine.generate([others[0], request, *others[1:]])[1].outputs[0].token_ids
    assert alone == batched
    different_seed = engine.generate([GenerationRequest("hello", max_tokens=12, temperature=1.0, top_p=0.9, seed=43)])
    assert different_seed[0].outputs[0].token_ids != alone
