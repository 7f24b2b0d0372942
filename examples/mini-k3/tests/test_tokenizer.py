"""Tests of the byte-level tokenizer and its chat template."""

from __future__ import annotations

import pytest

from mini_k3.tokenizer import BYTE_TOKENS, ByteTokenizer


@pytest.fixture()
def tok() -> ByteTokenizer:
    return ByteTokenizer()


@pytest.mark.parametrize("text", ["", "hello", "naïve café ☕ 日本", "{\"a\": [1, 2]}\n\\boxed{7}"])
def test_encode_decode_round_trip(tok, text):
    ids = tok.encode(text)
    assert all(0 <= i < BYTE_TOKENS for i in ids)
    assert ids == list(text.encode("utf-8"))
    assert tok.decode(ids) == text


def test_special_tokens_encode_to_single_ids(tok):
    ids = tok.encode("<|user|>hi<|end|>")
    assert ids == [tok.special_to_id["<|user|>"], ord("h"), ord("i"), tok.end_id]
    assert tok.decode(ids) == "<|user|>hi<|end|>"
    assert tok.decode(ids, skip_special=True) == "hi"
    assert tok.encode("<|end|>", allow_special=False) == list(b"<|end|>")


def test_partial_utf8_decodes_with_replacement_character(tok):
    ids = tok.encode("é")  # two bytes
    assert tok.decode(ids[:1]) == "\ufffd"
    assert tok.decode(ids[:1] + [tok.end_id] + ids) == "\ufffd<|end|>é"


def test_chat_template_renders_roles_and_generation_prompt(tok):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    text = tok.apply_chat_template(messages)
    assert text == "<|bos|><|system|>be brief<|end|><|user|>hi<|end|><|assistant|>"
    assert tok.apply_chat_template(messages, add_generation_prompt=False).endswith("hi<|end|>")
    ids = tok.apply_chat_template(messages, tokenize=True)
    assert ids[0] == tok.bos_id and ids[-1] == tok.special_to_id["<|assistant|>"]
    assert tok.decode(ids) == text


def test_chat_template_rejects_unknown_role(tok):
    with pytest.raises(ValueError, match="role"):
        tok.apply_chat_template([{"role": "tool", "content": "x"}])


def test_special_ids_fit_in_model_vocab(tok):
    from mini_k3.config import MiniK3Config

    assert tok.n_tokens <= MiniK3Config().vocab_size
    assert set(tok.stop_ids) == {tok.end_id, tok.eos_id}
