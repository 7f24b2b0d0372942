"""The client the checks drive a server side through (and ``TargetLM`` over it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fasttrack.errors import TargetError
from fasttrack.targets.http import DEFAULT_TIMEOUT_S, send
from fasttrack.targets.openai.server import ManagedServer


class OpenAITarget:
    """A target over an OpenAI-compatible HTTP API, for ``TargetLM``.

    Chat-message contexts go to ``/v1/chat/completions`` (the server applies its chat template);
    plain prompts to ``/v1/completions``. ``finish_reason == "error"`` is read as non-finite
    logits (what the example server reports for a corrupted request).
    """

    accepts_messages = True

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        concurrency: int = 4,
        server: ManagedServer | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.concurrency = max(1, concurrency)
        self.server = server

    def generate(self, requests: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(pool.map(self._one, requests))

    def _one(self, req: Mapping[str, Any]) -> dict[str, Any]:
        import httpx

        body: dict[str, Any] = {k: req[k] for k in ("max_tokens", "temperature", "top_p", "seed") if k in req}
        if req.get("stop"):
            body["stop"] = list(req["stop"])
        if self.model:
            body["model"] = self.model
        chat = "messages" in req
        body["messages" if chat else "prompt"] = req["messages"] if chat else req["prompt"]
        path = "/v1/chat/completions" if chat else "/v1/completions"
        url = self.base_url + path
        try:
            r = send("POST", path, lambda: httpx.post(url, json=body, timeout=self.timeout_s))
        except httpx.HTTPError as exc:
            if self.server is not None:
                self.server.ensure_alive()
            raise TargetError(f"request to {self.base_url}{path} failed: {type(exc).__name__}: {exc}") from exc
        if r.status_code != 200:
            raise TargetError(f"{self.base_url}{path} answered HTTP {r.status_code}: {r.text[:300]}")
        try:
            choice = r.json()["choices"][0]
            text = choice["message"]["content"] if chat else choice["text"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise TargetError(
                f"{self.base_url}{path} answered without an OpenAI {'chat ' if chat else ''}completion "
                f"({type(exc).__name__}: {exc}): {r.text[:200]}"
            ) from None
        return {"text": text or "", "finish_reason": choice.get("finish_reason")}
