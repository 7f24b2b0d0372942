"""Prompts of the gate's MRCR and AIME25 tasks rendered through mini-k3's chat template as text.

lm-eval's ``local-completions`` sends a task's context string as the prompt, and its chat path
would wrap the tasks' JSON message lists into one user message. These render the messages with
mini-k3's template instead (``<|bos|><|user|>...<|end|><|assistant|>``): the server's tokenizer
turns the special-token spellings into mini-k3's ids, so the prompt ids are exactly those mini-k3
and the gate's in-process target use.
"""

from __future__ import annotations

import json

from mini_k3.tokenizer import ByteTokenizer

_TOKENIZER = ByteTokenizer()


def mrcr_prompt(doc: dict) -> str:
    return str(_TOKENIZER.apply_chat_template(json.loads(doc["prompt"])))


def aime_prompt(doc: dict) -> str:
    return str(_TOKENIZER.apply_chat_template([{"role": "user", "content": str(doc["problem"])}]))
