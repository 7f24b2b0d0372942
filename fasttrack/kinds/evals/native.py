"""lm-eval's own API clients against a server side: ``local-completions`` (``/v1/completions``)
and ``local-chat-completions`` (``/v1/chat/completions``), as a vLLM user runs lm-eval against
``vllm serve``, with no fasttrack adapter in between.

An eval chooses one with ``lm_eval_model``; without it a server side is driven through
fasttrack's adapter (`fasttrack.targets.lm_adapter.TargetLM`), which renders a context that is a
JSON message list (the shipped MRCR task) through the server's chat endpoint: lm-eval's chat
client would send that list as the text of one user message. The eval's ``model_args`` go to
lm-eval's client as lm-eval reads them; fasttrack adds the server's URL and served model, and
defaults that need no local tokenizer (text prompts, the server tokenizes)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.error import URLError
from urllib.request import urlopen

from fasttrack.errors import TargetError

ENDPOINTS = {"local-completions": "/v1/completions", "local-chat-completions": "/v1/chat/completions"}
# Without a local tokenizer: text prompts, the server tokenizes them (lm-eval's own options).
DEFAULT_ARGS: dict[str, Any] = {"tokenizer_backend": None, "tokenized_requests": False, "max_retries": 3}
NOT_LM_EVAL_ARGS = ("max_gen_toks",)  # applied as generation.max_tokens, for both sides alike


def declared_model(eval_cfg: Mapping[str, Any]) -> str | None:
    """The lm-eval client the eval declares for server sides (None: fasttrack's adapter)."""
    name = eval_cfg.get("lm_eval_model")
    return str(name) if name else None


def served_model(url: str, timeout_s: float = 30.0) -> str:
    """The first model a server lists on ``/v1/models``."""
    try:
        with urlopen(f"{url.rstrip('/')}/v1/models", timeout=timeout_s) as response:
            return str(json.loads(response.read())["data"][0]["id"])
    except (OSError, URLError, KeyError, IndexError, ValueError) as exc:
        raise TargetError(f"{url}/v1/models: cannot read the served model for lm-eval: {exc}") from exc


def client_args(model: str, url: str, served: str, model_args: Mapping[str, Any], concurrency: int) -> dict[str, Any]:
    """lm-eval ``model_args`` of one side: the declared ones over fasttrack's defaults."""
    if model not in ENDPOINTS:
        raise TargetError(f"lm_eval_model {model!r} is not one of {', '.join(ENDPOINTS)}")
    declared = {k: v for k, v in model_args.items() if k not in NOT_LM_EVAL_ARGS}
    return {
        **DEFAULT_ARGS,
        **declared,
        "base_url": url.rstrip("/") + ENDPOINTS[model],
        "model": served,
        "num_concurrent": int(concurrency),
    }


def lm_eval_client(model: str, args: Mapping[str, Any]) -> Any:
    """lm-eval's registered model class ``model``, made from ``args``."""
    from lm_eval.api.registry import get_model

    try:
        return get_model(model)(**dict(args))
    except (TypeError, ValueError) as exc:
        raise TargetError(f"lm-eval's {model} refused its model_args {dict(args)}: {exc}") from exc
