"""An lm-eval ``LM`` over a fasttrack target, so ``lm_eval.simple_evaluate`` can drive either side.

A target is any object with

* ``generate(requests: list[dict]) -> list[result]``: each request has ``prompt`` (str) or, when
  the target sets ``accepts_messages = True``, ``messages`` (chat messages), plus ``max_tokens``,
  ``temperature``, ``top_p``, ``seed`` and ``stop``. A result is a string, a dict with ``text``
  (and optionally ``non_finite_logits`` / ``finish_reason``), or an object with ``outputs[0].text``
  and ``non_finite_logits`` (the example's ``GenerationResult``);
* optionally ``apply_chat_template(messages) -> str`` (renders a JSON message-list context, see
  ``checks/evals/mrcr/utils.py``) and ``loglikelihood(pairs) -> [(logprob, is_greedy)]``.

Both sides of a comparison get identical requests: the same rendering, generation settings and
seeds (repeat k of an item uses ``seed + k``, so repeats differ under sampling but match across
sides). Non-finite logits reported by the target are counted per doc, never hidden; the eval
runner fails the check on any.

This module imports lm-eval at import time: import it lazily (the runners do).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from lm_eval.api.model import LM

from fasttrack.errors import TargetError

DEFAULT_MAX_TOKENS = 256


def parse_messages(context: str) -> list[dict[str, str]] | None:
    """The chat messages of a context that is a JSON message list, else None."""
    text = context.strip()
    if not (text.startswith("[") and text.endswith("]")):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, list) or not value:
        return None
    for m in value:
        if not (isinstance(m, dict) and set(m) == {"role", "content"} and isinstance(m["content"], str)):
            return None
    return value


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def result_text(result: Any) -> tuple[str, bool]:
    """(text, non_finite) of one target result in any of the accepted shapes."""
    if isinstance(result, str):
        return result, False
    if isinstance(result, dict):
        bad = bool(result.get("non_finite_logits")) or result.get("finish_reason") == "error"
        return str(result.get("text", "")), bad
    outputs = getattr(result, "outputs", None)
    if outputs:
        first = outputs[0]
        bad = bool(getattr(result, "non_finite_logits", False)) or getattr(first, "finish_reason", "") == "error"
        return str(first.text), bad
    raise TargetError(f"target returned an unrecognised generation result: {type(result).__name__}")


class TargetLM(LM):
    """lm-eval ``LM`` wrapping one side (baseline or candidate) of a comparison."""

    def __init__(
        self, target: Any, *, name: str, seed: int = 1234, batch_size: int = 8, generation: dict[str, Any] | None = None
    ):
        super().__init__()
        self.target = target
        self.name = name
        self.seed = int(seed)
        self.batch_size = max(1, int(batch_size))
        # manifest generation settings override the task's (the same on both sides)
        self.generation = dict(generation or {})
        # keyed by lm-eval's prompt_hash (sha256 of the context), which the runner joins on
        self.non_finite: Counter = Counter()  # prompt_hash -> responses with non-finite logits
        self.rendered_prompt_hash: dict[str, str] = {}  # prompt_hash -> sha256 of what was sent
        self.requests_sent = 0

    # -- lm-eval interface ---------------------------------------------------------------------

    def generate_until(self, requests: Sequence[Any], disable_tqdm: bool = False) -> list[str]:
        occurrence: Counter = Counter()
        payloads, keys = [], []
        for req in requests:
            occurrence[id(req)] += 1
            context, gen_kwargs = req.args[0], dict(req.args[1] if len(req.args) > 1 else {})
            payload = self._request(context, gen_kwargs, repeat=occurrence[id(req)] - 1)
            key = sha256_text(context)
            # what was actually sent (rendered prompt and generation settings): must match across sides
            self.rendered_prompt_hash.setdefault(key, sha256_text(json.dumps(payload, sort_keys=True)))
            payloads.append(payload)
            keys.append(key)
        texts: list[str] = []
        for start in range(0, len(payloads), self.batch_size):
            chunk = payloads[start : start + self.batch_size]
            try:
                results = list(self.target.generate(chunk))
            except TargetError:
                raise
            except Exception as exc:  # the system under test crashed: report it as such
                raise TargetError(f"{self.name}: target.generate failed: {type(exc).__name__}: {exc}") from exc
            if len(results) != len(chunk):
                raise TargetError(f"{self.name}: target returned {len(results)} results for {len(chunk)} requests")
            for key, result in zip(keys[start : start + self.batch_size], results):
                text, bad = result_text(result)
                if bad:
                    self.non_finite[key] += 1
                texts.append(text)
        self.requests_sent += len(payloads)
        return texts

    def loglikelihood(self, requests: Sequence[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        fn = getattr(self.target, "loglikelihood", None)
        if fn is None:
            raise TargetError(f"{self.name}: target has no loglikelihood(); this task needs it")
        return [(float(lp), bool(greedy)) for lp, greedy in fn([tuple(r.args[:2]) for r in requests])]

    def loglikelihood_rolling(self, requests: Sequence[Any], disable_tqdm: bool = False) -> list[float]:
        raise TargetError(
            f"{self.name}: rolling loglikelihood (perplexity tasks) is not supported by fasttrack targets"
        )

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return self._render(chat_history)

    @property
    def tokenizer_name(self) -> str:
        return f"fasttrack-{self.name}"

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        return "target" if hasattr(self.target, "apply_chat_template") else None

    # -- helpers -------------------------------------------------------------------------------

    def _render(self, messages: list[dict[str, str]]) -> str:
        fn = getattr(self.target, "apply_chat_template", None)
        if fn is None:
            raise TargetError(f"{self.name}: the task sends chat messages but the target has no apply_chat_template()")
        return fn(messages)

    def _request(self, context: str, gen_kwargs: dict[str, Any], *, repeat: int) -> dict[str, Any]:
        settings = {**gen_kwargs, **self.generation}
        until = settings.get("until") or settings.get("stop") or []
        if isinstance(until, str):
            until = [until]
        temperature = float(settings.get("temperature") or 0.0)
        if settings.get("do_sample") is False and "temperature" not in self.generation:
            temperature = 0.0  # greedy, as the task asks
        payload: dict[str, Any] = {
            "max_tokens": int(settings.get("max_tokens") or settings.get("max_gen_toks") or DEFAULT_MAX_TOKENS),
            "temperature": temperature,
            "top_p": float(settings.get("top_p", 1.0)),
            "seed": int(settings.get("seed", self.seed)) + repeat,
            "stop": list(until),
        }
        messages = parse_messages(context)
        if messages is None:
            payload["prompt"] = context
        elif getattr(self.target, "accepts_messages", False):
            payload["messages"] = messages
        else:
            payload["prompt"] = self._render(messages)
        return payload
