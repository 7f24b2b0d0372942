"""Tests of the trainer's batches (deterministic, loss on answers only) and a resumable tiny run."""

from __future__ import annotations

import json
import random

import pytest
import torch

from mini_k3 import train
from mini_k3.tokenizer import ByteTokenizer


def test_batches_are_a_function_of_seed_and_step():
    a = train.make_batch(1, 7, 100, 4000)
    b = train.make_batch(1, 7, 100, 4000)
    assert a.kind == b.kind and torch.equal(a.ids, b.ids)
    other = train.make_batch(1, 8, 100, 4000)
    assert other.ids.shape != a.ids.shape or not torch.equal(other.ids, a.ids)


def test_loss_mask_covers_exactly_the_answer_and_end_token():
    tok = ByteTokenizer()
    batch = train.make_batch(3, 0, 100, 3000)
    for row, mask in zip(batch.ids.tolist(), batch.loss_mask.tolist()):
        assistant = tok.special_to_id["<|assistant|>"]
        last_assistant = max(i for i, t in enumerate(row) if t == assistant)
        marked = [i for i, m in enumerate(mask) if m]
        assert marked[0] == last_assistant + 1
        assert row[marked[-1]] == tok.end_id
        assert all(row[i] != tok.pad_id for i in marked)
        assert marked == list(range(marked[0], marked[-1] + 1))


@pytest.mark.slow
def test_tiny_run_resumes_to_the_same_losses(tmp_path):
    common = ["--device", "cpu", "--tiny", "--steps", "4", "--tokens-per-step", "1500", "--log-every", "1",
              "--checkpoint-every", "2", "--warmup", "2"]
    train.main(common + ["--work-dir", str(tmp_path / "a"), "--out", str(tmp_path / "wa")])
    train.main(common + ["--work-dir", str(tmp_path / "b"), "--stop-at-step", "3"])
    train.main(common + ["--work-dir", str(tmp_path / "b"), "--resume", "--out", str(tmp_path / "wb")])
    a = json.loads((tmp_path / "wa" / "losses.json").read_text())
    b = json.loads((tmp_path / "wb" / "losses.json").read_text())
    assert a["log"] == b["log"] and a["steps"] == b["steps"] == 4
    assert (tmp_path / "wa" / "model.safetensors").stat().st_size > 0


def test_retrieval_mix_weights_the_needle_words_and_nothing_outside_the_answer():
    tok = ByteTokenizer()
    kinds = set()
    for step in range(12):
        batch = train.make_batch(5, step, 100, 3000, mix="retrieval", copy_weight=4.0)
        kinds.add(batch.kind)
        assert (batch.loss_weight[batch.ids == tok.pad_id] == 0).all()  # padding is never predicted
        if not batch.kind.startswith("mrcr"):
            assert set(batch.loss_weight[batch.loss_mask].tolist()) == {1.0}
            continue
        for row, weight in zip(batch.ids.tolist(), batch.loss_weight.tolist()):
            heavy = [i for i, w in enumerate(weight) if w == 4.0]
            light = [i for i, w in enumerate(weight) if w == 1.0]
            # the heavy span is the needle's words: right after "<random string><form> k about <topic>: "
            words = tok.decode(row[heavy[0]: heavy[-1] + 1])
            header = tok.decode(row[light[0]: heavy[0]])
            assert header.endswith(": ") and " about " in header
            assert all(w.isalpha() for w in words.split())
            assert row[light[-1]] == tok.end_id  # the closing token keeps weight 1
    assert "mrcr_short" in kinds


def test_repeat_task_weights_every_repeated_word_and_the_answer_is_in_the_prompt():
    tok = ByteTokenizer()
    ids, start, copy_start = train.example("repeat", random.Random(2))
    prompt, answer = tok.decode(ids[:start]), tok.decode(ids[start:-1])
    assert copy_start == start and ids[-1] == tok.end_id
    assert f"repeat after me: {answer}<|end|>" in prompt
    batches = [train.make_batch(4, s, 100, 500, mix="copy", copy_weight=3.0) for s in range(40)]
    assert {"repeat", "mrcr_short", "aime"} <= {b.kind for b in batches}
    repeat = next(b for b in batches if b.kind == "repeat")
    light = repeat.loss_weight == 1.0
    assert (repeat.ids[light] == tok.end_id).all()  # only the closing token is not a copied byte
    assert (repeat.loss_weight[repeat.loss_mask & ~light] == 3.0).all()


def test_default_mix_batches_are_unchanged_by_the_weighting():
    batch = train.make_batch(3, 0, 100, 3000)
    assert set(batch.loss_weight[batch.loss_mask].tolist()) == {1.0}


def test_a_copy_weight_that_would_drop_answer_tokens_is_refused():
    with pytest.raises(ValueError, match="copy_weight must be positive"):
        train.make_batch(3, 0, 100, 3000, mix="retrieval", copy_weight=0.0)


@pytest.mark.parametrize("mix", sorted(train.MIXES))
def test_every_mix_gives_one_probability_per_kind_at_every_stage_of_training(mix):
    for progress in (0.0, 0.14, 0.15, 0.5, 1.0):
        weights = train.kind_weights(progress, mix)
        assert len(weights) == len(train.MIXES[mix])
        assert all(w >= 0 for w in weights) and sum(weights) == pytest.approx(1.0)
    for kind in train.MIXES[mix]:  # every kind a mix names can be generated
        ids, answer_start, _ = train.example(kind, random.Random(0))
        assert 0 < answer_start < len(ids)
