"""JSON-schema structured output through xgrammar.

The mini-K3 tokenizer is byte level, so its vocabulary is handed to xgrammar as a RAW vocabulary:
token ``i < 256`` is the one byte ``i``; special tokens are given as empty byte strings, which
xgrammar treats as special (never allowed inside the grammar), and the end-of-sequence token is
the stop token the grammar allows once the JSON value is complete.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
import torch
import xgrammar


class InvalidSchemaError(ValueError):
    """The requested JSON schema is not a valid schema, or the grammar library rejects it."""


@dataclass(frozen=True)
class ByteVocabulary:
    """What xgrammar needs to know about the tokenizer."""

    encoded: tuple[bytes, ...]  # one entry per token id; b"" for special tokens
    stop_token_ids: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.encoded)


def byte_vocabulary(vocab_size: int, stop_token_ids: Sequence[int], byte_tokens: int = 256) -> ByteVocabulary:
    """A byte-level vocabulary: ids below ``byte_tokens`` are raw bytes, the rest special."""
    encoded = tuple(bytes([i]) if i < byte_tokens else b"" for i in range(vocab_size))
    return ByteVocabulary(encoded=encoded, stop_token_ids=tuple(stop_token_ids))


def parse_schema(schema: dict[str, Any] | str) -> dict[str, Any]:
    """Check that ``schema`` is a JSON schema (Draft 2020-12 meta-schema) and return it as a dict."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise InvalidSchemaError(f"schema is not valid JSON: {exc}") from exc
    if not isinstance(schema, dict):
        raise InvalidSchemaError("schema must be a JSON object")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise InvalidSchemaError(f"invalid JSON schema: {exc.message}") from exc
    return schema


class GrammarCompiler:
    """Compiles schemas for one tokenizer; compiled grammars are cached by xgrammar."""

    def __init__(self, vocabulary: ByteVocabulary):
        self.vocabulary = vocabulary
        info = xgrammar.TokenizerInfo(
            list(vocabulary.encoded),
            xgrammar.VocabType.RAW,
            vocab_size=vocabulary.size,
            stop_token_ids=list(vocabulary.stop_token_ids),
        )
        self._compiler = xgrammar.GrammarCompiler(info, max_threads=1)

    def json_schema(self, schema: dict[str, Any] | str) -> xgrammar.CompiledGrammar:
        """Grammar for one schema. Whitespace is compact so a value cannot grow without bound."""
        parsed = parse_schema(schema)
        try:
            return self._compiler.compile_json_schema(json.dumps(parsed), any_whitespace=False)
        except RuntimeError as exc:
            raise InvalidSchemaError(f"schema not supported for constrained decoding: {exc}") from exc

    def any_json(self) -> xgrammar.CompiledGrammar:
        """Grammar for any JSON value (``response_format: {"type": "json_object"}``)."""
        return self._compiler.compile_builtin_json_grammar()


class TokenConstraint:
    """The grammar state of one sequence: masks its logits and follows its tokens."""

    def __init__(self, compiled: xgrammar.CompiledGrammar, vocab_size: int):
        self._matcher = xgrammar.GrammarMatcher(compiled)
        self._vocab_size = vocab_size
        self._bitmask = xgrammar.allocate_token_bitmask(1, vocab_size)

    def mask_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """A copy of the ``[V]`` logits row with every token the grammar forbids set to -inf."""
        self._matcher.fill_next_token_bitmask(self._bitmask)
        masked = logits.detach().float().cpu().clone().unsqueeze(0)
        xgrammar.apply_token_bitmask_inplace(masked, self._bitmask, vocab_size=self._vocab_size)
        return masked.squeeze(0).to(logits.device)

    def accept(self, token_id: int) -> bool:
        """Advance the grammar by one token; False if the grammar does not allow it."""
        return bool(self._matcher.accept_token(int(token_id)))

    @property
    def finished(self) -> bool:
        """True once the value is complete and the stop token has been accepted."""
        return bool(self._matcher.is_terminated())
