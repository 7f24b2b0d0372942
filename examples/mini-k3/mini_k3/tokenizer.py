"""Byte-level tokenizer with chat special tokens.

Ids 0-255 are the raw UTF-8 bytes; the special tokens follow. Text encodes to its UTF-8 bytes,
except that the literal spellings of special tokens (``<|user|>`` ...) become their ids when
``allow_special`` is on (the chat template relies on that). Decoding a cut through a multi-byte
character gives U+FFFD instead of raising.

Chat template (one string)::

    <|bos|><|system|>...<|end|><|user|>...<|end|><|assistant|>...<|end|>

A generation prompt appends ``<|assistant|>``; the model ends its turn with ``<|end|>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

BYTE_TOKENS = 256
SPECIAL_TOKENS: tuple[str, ...] = (
    "<|bos|>", "<|eos|>", "<|pad|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>",
)
ROLES = ("system", "user", "assistant")


class ByteTokenizer:
    """Bytes plus a handful of special tokens; stateless and cheap to construct."""

    def __init__(self) -> None:
        self.special_to_id = {tok: BYTE_TOKENS + i for i, tok in enumerate(SPECIAL_TOKENS)}
        self.id_to_special = {i: tok for tok, i in self.special_to_id.items()}
        self._special_pattern = re.compile("|".join(re.escape(t) for t in SPECIAL_TOKENS))

    # ids of the special tokens, by name
    @property
    def bos_id(self) -> int:
        return self.special_to_id["<|bos|>"]

    @property
    def eos_id(self) -> int:
        return self.special_to_id["<|eos|>"]

    @property
    def pad_id(self) -> int:
        return self.special_to_id["<|pad|>"]

    @property
    def end_id(self) -> int:
        """End of a chat turn: where generation of an assistant message stops."""
        return self.special_to_id["<|end|>"]

    @property
    def stop_ids(self) -> tuple[int, ...]:
        return (self.end_id, self.eos_id)

    @property
    def n_tokens(self) -> int:
        """Ids in use (the model's vocab_size may be larger)."""
        return BYTE_TOKENS + len(SPECIAL_TOKENS)

    def is_special(self, token_id: int) -> bool:
        return token_id >= BYTE_TOKENS

    def encode(self, text: str, allow_special: bool = True) -> list[int]:
        """UTF-8 bytes of ``text``; special-token spellings become their ids if allowed."""
        if not allow_special:
            return list(text.encode("utf-8"))
        ids: list[int] = []
        pos = 0
        for match in self._special_pattern.finditer(text):
            ids.extend(text[pos:match.start()].encode("utf-8"))
            ids.append(self.special_to_id[match.group()])
            pos = match.end()
        ids.extend(text[pos:].encode("utf-8"))
        return ids

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        """Text of ``ids``; broken UTF-8 (e.g. a cut character) decodes with U+FFFD."""
        out: list[str] = []
        buf = bytearray()
        for token_id in ids:
            token_id = int(token_id)
            if token_id < BYTE_TOKENS:
                buf.append(token_id)
                continue
            out.append(buf.decode("utf-8", errors="replace"))
            buf.clear()
            if not skip_special:
                out.append(self.id_to_special.get(token_id, ""))
        out.append(buf.decode("utf-8", errors="replace"))
        return "".join(out)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes one token stands for (empty for special tokens)."""
        return bytes([token_id]) if token_id < BYTE_TOKENS else b""

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, str]],
        add_generation_prompt: bool = True,
        tokenize: bool = False,
    ) -> str | list[int]:
        """Render chat ``messages`` (dicts with ``role`` and ``content``) as one prompt."""
        parts = ["<|bos|>"]
        for i, message in enumerate(messages):
            role = message.get("role")
            if role not in ROLES:
                raise ValueError(f"message {i}: role must be one of {ROLES}, got {role!r}")
            content = message.get("content")
            if not isinstance(content, str):
                raise ValueError(f"message {i}: content must be a string")
            parts.append(f"<|{role}|>{content}<|end|>")
        if add_generation_prompt:
            parts.append("<|assistant|>")
        text = "".join(parts)
        return self.encode(text) if tokenize else text
