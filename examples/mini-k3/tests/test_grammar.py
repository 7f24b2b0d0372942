"""JSON-schema constrained decoding through xgrammar with the byte-level vocabulary."""

from __future__ import annotations

import json

import jsonschema
import pytest
import torch
from mini_k3.config import MiniK3Config
from mini_k3.engine import Engine, GenerationRequest
from mini_k3.grammar import (
    GrammarCompiler,
    InvalidSchemaError,
    TokenConstraint,
    byte_vocabulary,
)
from mini_k3.model import MiniK3
from mini_k3.tokenizer import ByteTokenizer

TOKENIZER = ByteTokenizer()
SCHEMAS = {
    "flags": {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}, "colour": {"enum": ["red", "green", "blue"]}},
        "required": ["ok", "colour"],
        "additionalProperties": False,
    },
    "scores": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "minItems": 1, "maxItems": 3},
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z]{1,6}$"},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "tags": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 2},
        },
        "required": ["name", "age", "tags"],
        "additionalProperties": False,
    },
}



@pytest.fixture(scope="module")
def compiler() -> GrammarCompiler:
    return GrammarCompiler(byte_vocabulary(264, TOKENIZER.stop_ids))


@pytest.fixture(scope="module")
def engine() -> Engine:
    torch.manual_seed(0)
    return Engine(model=MiniK3(MiniK3Config.tiny()), tokenizer=TOKENIZER)


def test_mask_allows_only_what_the_schema_allows_next(compiler: GrammarCompiler) -> None:
    constraint = TokenConstraint(compiler.json_schema(SCHEMAS["flags"]), 264)
    masked = constraint.mask_logits(torch.zeros(264))
    assert torch.isfinite(masked).nonzero().flatten().tolist() == [ord("{")]
    for byte in b'{"ok":':
        assert constraint.accept(byte)
    allowed = torch.isfinite(constraint.mask_logits(torch.zeros(264))).nonzero().flatten().tolist()
    assert allowed == [ord(" ")]  # xgrammar's fixed separator ": " (no free whitespace)
    assert constraint.accept(ord(" "))
    allowed = torch.isfinite(constraint.mask_logits(torch.zeros(264))).nonzero().flatten().tolist()
    assert sorted(allowed) == sorted({ord("t"), ord("f")})  # true / false
    assert not constraint.accept(ord("1"))
    assert not constraint.finished


def test_special_tokens_are_never_allowed_inside_the_value(compiler: GrammarCompiler) -> None:
    constraint = TokenConstraint(compiler.json_schema(SCHEMAS["scores"]), 264)
    allowed = torch.isfinite(constraint.mask_logits(torch.zeros(264))).nonzero().flatten()
    assert (allowed < 256).all()


@pytest.mark.parametrize("schema", [{"type": "objectx"}, {"type": "object", "minProperties": "two"}, "{not json", []])
def test_invalid_schemas_are_rejected(compiler: GrammarCompiler, schema) -> None:
    with pytest.raises(InvalidSchemaError):
        compiler.json_schema(schema)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_constrained_outputs_are_always_schema_valid(engine: Engine, name: str) -> None:
    schema = SCHEMAS[name]
    requests = [GenerationRequest("Answer in JSON:", max_tokens=120, temperature=1.0, seed=s, n=6, json_schema=schema)
                for s in range(3)]
    requests.append(GenerationRequest("Answer in JSON:", max_tokens=120, temperature=0.0, json_schema=schema))
    outputs = [o for r in engine.generate(requests) for o in r.outputs]
    assert len(outputs) == 19
    for out in outputs:
        assert out.finish_reason == "stop", out
        jsonschema.validate(json.loads(out.text), schema)


def test_unconstrained_random_model_output_is_not_json(engine: Engine) -> None:
    # The constraint, not luck, makes the outputs above valid.
    [result] = engine.generate([GenerationRequest("Answer in JSON:", max_tokens=30, temperature=1.0, seed=0)])
    with pytest.raises(ValueError):
        json.loads(result.outputs[0].text)


def test_json_object_mode_keeps_every_output_a_json_prefix(engine: Engine, compiler: GrammarCompiler) -> None:
    requests = [GenerationRequest("{", max_tokens=60, temperature=1.0, seed=0, n=8, json_object=True)]
    outputs = engine.generate(requests)[0].outputs
    for out in outputs:
        checker = TokenConstraint(compiler.any_json(), 264)
        assert all(checker.accept(t) for t in out.token_ids), out.text
        if out.finish_reason == "stop":
            json.loads(out.text)
    assert any(out.finish_reason == "stop" for out in outputs)
