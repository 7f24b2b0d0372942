"""The planted faults of the mixed-batch and drafter classes (mini_k3/faults.py): each acts on the
one engine it is planted on, never on another engine of the same process (stock's)."""

from __future__ import annotations

import pytest
import torch
from mini_k3.config import MiniK3Config
from mini_k3.engine import Engine, GenerationRequest
from mini_k3.faults import late_drafter, plant_first_row_sampling
from mini_k3.model import MiniK3
from mini_k3.speculative import propose_draft
from mini_k3.tokenizer import ByteTokenizer

TOKENIZER = ByteTokenizer()
PROMPTS = ["abcabcabcabcabc", "the cat sat on the mat; the cat sat on the", "1 2 3 1 2 3 1 2"]


@pytest.fixture(scope="module")
def model() -> MiniK3:
    torch.manual_seed(1)
    model = MiniK3(MiniK3Config.tiny())
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(4.0)
    return model.eval()


def test_the_late_drafter_proposes_the_continuation_one_token_late_at_two_of_three_steps() -> None:
    tokens = [1, 2, 3, 9, 1, 2, 3, 4, 5, 6, 1, 2, 3]  # the latest [1, 2, 3] was followed by 4, 5, 6
    draft = late_drafter(propose_draft)
    assert [draft(tokens, 2) for _ in range(3)] == [[5, 6], [5, 6], [4, 5]]
    assert draft(tokens, 0) == []  # no drafting step: the count stays
    assert draft(tokens, 2) == [5, 6]
    assert propose_draft(tokens, 2) == [4, 5]  # the module's drafter is untouched


def test_a_late_drafter_keeps_greedy_output_and_lowers_acceptance_of_its_engine_only(model: MiniK3) -> None:
    requests = [GenerationRequest(p, max_tokens=40, temperature=0.0, ignore_eos=True) for p in PROMPTS]
    faulty = Engine(model=model, tokenizer=TOKENIZER, speculative_draft_tokens=4)
    faulty.propose_draft = late_drafter(faulty.propose_draft)
    stock = Engine(model=model, tokenizer=TOKENIZER, speculative_draft_tokens=4)
    late = [r.outputs[0].token_ids for r in faulty.generate(requests)]
    right = [r.outputs[0].token_ids for r in stock.generate(requests)]
    assert late == right  # verification rejects what the model does not pick
    assert faulty.stats.speculative.drafts > 0
    assert faulty.stats.speculative.mean_acceptance_length < stock.stats.speculative.mean_acceptance_length


def test_first_row_sampling_samples_every_row_with_the_first_rows_parameters(model: MiniK3) -> None:
    greedy = GenerationRequest(PROMPTS[1], max_tokens=6, temperature=0.0, ignore_eos=True)
    sampled = GenerationRequest(PROMPTS[1], max_tokens=6, temperature=1.5, seed=7, n=8, ignore_eos=True)
    faulty = Engine(model=model, tokenizer=TOKENIZER)
    plant_first_row_sampling(faulty)
    stock = Engine(model=model, tokenizer=TOKENIZER)

    def texts(engine: Engine, batch: list[GenerationRequest]) -> list[set[tuple[int, ...]]]:
        return [{o.token_ids for o in r.outputs} for r in engine.generate(batch)]

    alone = texts(faulty, [sampled])[0]
    assert len(alone) > 1 and alone == texts(stock, [sampled])[0]  # alone: served right
    want_greedy, leaked = texts(faulty, [greedy, sampled])
    assert leaked == want_greedy  # behind a greedy row every sample is the greedy text
    stock_greedy, stock_sampled = texts(stock, [greedy, sampled])
    assert stock_greedy == want_greedy and len(stock_sampled) > 1  # stock keeps each row's own
