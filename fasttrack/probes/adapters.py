"""ProbeTarget adapters: an in-process target object, and an OpenAI-compatible HTTP server.

In-process: any object with ``generate(requests)`` taking dicts of the example engine's
``GenerationRequest`` fields and returning results with ``.outputs`` (text, token_ids, logprobs,
finish_reason), ``next_token_logprobs(ids)`` and optionally ``path_report()`` / ``tokenizer`` —
the shape of ``mini_k3.fasttrack_target:create``.

HTTP: ``/v1/completions`` (with ``logprobs`` and ``echo`` for teacher-forced scoring),
``/tokenize`` and Prometheus ``/metrics`` (``*spec_decode_num_{drafts,draft_tokens,accepted_tokens}``).
Over HTTP only the top-k of each distribution is known, so ``next_token_logprobs`` raises
CapabilityMissing and probes that need full distributions say so instead of guessing.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fasttrack.manifest.sections import thaw
from fasttrack.probes.base import (
    CapabilityMissing,
    Completion,
    CompletionRequest,
    RequestRefused,
    SpeculativeCounters,
    TargetContractError,
    TargetFailure,
    TargetUnreachable,
    TokenLogprob,
)
from fasttrack.targets.http import DEFAULT_TIMEOUT_S, send
from fasttrack.targets.protocol import PathReporting

# What an in-process target's generate() must return, said once for every shape error.
RESULT_SHAPE = (
    "one result per request, each with .outputs: a list of n completions with .text, .token_ids, "
    ".finish_reason (and .logprobs when asked), like mini_k3.fasttrack_target"
)


class InProcessProbeTarget:
    """Adapts an in-process target (a `fasttrack.targets.protocol.Target`, such as the example's
    ``mini_k3.fasttrack_target.MiniK3Target``)."""

    def __init__(
        self, target: Any, name: str = "candidate", max_context: int | None = None, through_decode: bool | None = None
    ):
        self.target = target
        self.name = name
        self._max_context = max_context
        # Teacher-forced scoring through the decode path (one token per step, the path an
        # optimised build changes) or one prefill pass; None: the target's own default.
        self.through_decode = through_decode

    @property
    def max_context(self) -> int:
        if self._max_context is not None:
            return self._max_context
        value = getattr(self.target, "max_context", None)
        if value is None:
            raise CapabilityMissing("the target does not say its maximum context length")
        return int(value)

    def tokenize(self, text: str) -> list[int]:
        tokenizer = getattr(self.target, "tokenizer", None)
        if tokenizer is None:
            raise CapabilityMissing("the target exposes no tokenizer")
        return list(tokenizer.encode(text))

    def complete(self, request: CompletionRequest) -> list[Completion]:
        return self.complete_batch([request])[0]

    def complete_batch(self, requests: Sequence[CompletionRequest]) -> list[list[Completion]]:
        payload = [_request_fields(r) for r in requests]
        try:
            results = self.target.generate(payload)
        except Exception as exc:  # the system under test failed: report it, do not crash the gate
            raise TargetFailure(f"{type(exc).__name__}: {exc}") from exc
        return completions_of(results, requests, type(self.target).__name__)

    def next_token_logprobs(self, token_ids: Sequence[int]) -> np.ndarray:
        kwargs = {} if self.through_decode is None else {"through_decode": self.through_decode}
        try:
            rows = self.target.next_token_logprobs(list(token_ids), **kwargs)
        except Exception as exc:
            raise TargetFailure(f"{type(exc).__name__}: {exc}") from exc
        return np.asarray(rows.detach().cpu().float().numpy() if hasattr(rows, "detach") else rows, dtype=np.float64)

    def next_token_logprobs_batch(
        self, rows: Sequence[Sequence[int]], through_decode: bool | None = None
    ) -> np.ndarray:
        """``[B, T, V]`` logprobs of equal-length rows, batched where the target can
        (``next_token_logprobs_batch``), else row by row. ``through_decode``: the decode path (True),
        one prefill pass (False) or this side's default (None)."""
        chosen = self.through_decode if through_decode is None else through_decode
        batched = getattr(self.target, "next_token_logprobs_batch", None)
        kwargs = {} if chosen is None else {"through_decode": chosen}
        try:
            if callable(batched):
                out = batched([list(r) for r in rows], **kwargs)
            else:
                if chosen is not None and not _accepts(self.target.next_token_logprobs, "through_decode"):
                    raise CapabilityMissing("the target's next_token_logprobs has no through_decode choice")
                out = [self.target.next_token_logprobs(list(r), **kwargs) for r in rows]
        except CapabilityMissing:
            raise
        except Exception as exc:
            raise TargetFailure(f"{type(exc).__name__}: {exc}") from exc
        if hasattr(out, "detach"):
            return np.asarray(out.detach().cpu().float().numpy(), dtype=np.float64)
        return np.stack(
            [np.asarray(r.detach().cpu().float().numpy() if hasattr(r, "detach") else r) for r in out]
        ).astype(np.float64)

    def speculative_counters(self) -> SpeculativeCounters | None:
        report = self.target.path_report() if isinstance(self.target, PathReporting) else {}
        spec = report.get("speculative")
        if not spec:
            return None
        return SpeculativeCounters(int(spec["drafts"]), int(spec["draft_tokens"]), int(spec["accepted_tokens"]))


def _accepts(fn: Any, name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _request_fields(r: CompletionRequest) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "prompt": r.prompt if isinstance(r.prompt, str) else list(r.prompt),
        "max_tokens": r.max_tokens,
        "temperature": r.temperature,
        "top_p": r.top_p,
        "seed": r.seed,
        "n": r.n,
        "stop": tuple(r.stop),
        "logprobs": r.logprobs,
        "ignore_eos": r.ignore_eos,
    }
    if r.json_schema is not None:
        fields["json_schema"] = thaw(r.json_schema)
    return fields


def completions_of(
    results: Any, requests: Sequence[CompletionRequest], target: str = "the target"
) -> list[list[Completion]]:
    """Read an in-process target's generate() results; TargetContractError names exactly what is
    missing (a dict or text result, no ``.outputs``, too few completions, a field missing)."""
    try:
        results = list(results)
    except TypeError:
        raise TargetContractError(
            f"{target}.generate() returned {type(results).__name__}, not a list; expected {RESULT_SHAPE}"
        ) from None
    if len(results) != len(requests):  # a batching bug of the system under test, not a shape problem
        raise TargetFailure(f"{target}.generate() returned {len(results)} results for {len(requests)} requests")
    out = []
    for i, result in enumerate(results):
        outputs = getattr(result, "outputs", None)
        if outputs is None:
            raise TargetContractError(
                f"{target}.generate() result {i} is a {type(result).__name__} without .outputs "
                f"(feature probes need token ids and per-token logprobs, not only text); expected {RESULT_SHAPE}"
            )
        # Fewer than n outputs, or no logprobs when asked, are for the probes to judge (n_samples, logprobs).
        out.append([_completion(o, i, target) for o in outputs])
    return out


def _completion(output: Any, index: int = 0, target: str = "the target") -> Completion:
    missing = [name for name in ("text", "token_ids", "finish_reason") if not hasattr(output, name)]
    if missing:
        raise TargetContractError(
            f"{target}.generate() result {index}: an output ({type(output).__name__}) lacks "
            f".{', .'.join(missing)}; expected {RESULT_SHAPE}"
        )
    logprobs = None
    if getattr(output, "logprobs", None) is not None:
        try:
            logprobs = tuple(
                TokenLogprob(int(e.token_id), float(e.logprob), {int(t): float(v) for t, v in e.top})
                for e in output.logprobs
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise TargetContractError(
                f"{target}.generate() result {index}: unreadable .logprobs ({type(exc).__name__}: {exc}); "
                "each entry needs .token_id, .logprob and .top (token id -> logprob)"
            ) from None
    try:
        token_ids = tuple(int(t) for t in output.token_ids)
    except (TypeError, ValueError) as exc:
        raise TargetContractError(
            f"{target}.generate() result {index}: .token_ids is not a sequence of ints ({exc})"
        ) from None
    return Completion(output.text, token_ids, output.finish_reason, logprobs)


# ---------------------------------------------------------------------------------------------


class OpenAIProbeTarget:
    """An OpenAI-compatible completions server (vLLM, the example's ``mini_k3.server``)."""

    independent_requests = True  # a server batches concurrent requests itself (probes.base.serve_each)

    def __init__(
        self,
        base_url: str,
        name: str = "candidate",
        model: str | None = None,
        max_context: int | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        client: Any = None,
        concurrency: int = 64,
        profiler: Any = None,
    ):
        import httpx

        self.concurrency = max(1, int(concurrency))  # requests in flight in complete_batch
        self.profiler = profiler  # the side's `Profiling` (its server's kernel census), if it has one
        self.name = name
        self.model = model
        self._max_context = max_context
        self.base_url = base_url.rstrip("/")
        self._client = client or httpx.Client(base_url=self.base_url, timeout=timeout_s)

    @property
    def max_context(self) -> int:
        if self._max_context is None:
            response = self._send("GET", "/v1/models", lambda: self._client.get("/v1/models"))
            if response.status_code in (404, 405, 501):
                raise CapabilityMissing(
                    f"the server at {self.base_url} has no /v1/models endpoint (HTTP {response.status_code}) to report "
                    "its max_model_len; set scope.context.max_tokens in the manifest"
                )
            models = self._checked("/v1/models", response).get("data") or [{}]
            value = models[0].get("max_model_len") if isinstance(models[0], Mapping) else None
            if value is None:
                raise CapabilityMissing("the server does not report max_model_len; set it in the manifest")
            self._max_context = int(value)
        return self._max_context

    def tokenize(self, text: str) -> list[int]:
        """vLLM's ``POST /tokenize``; a server without it (404/405/501, or an answer with no
        ``tokens`` list) lacks a capability the probe needs: CapabilityMissing says which."""
        body = {"prompt": text, "add_special_tokens": False, **self._model()}
        response = self._send("POST", "/tokenize", lambda: self._client.post("/tokenize", json=body))
        if response.status_code in (404, 405, 501):
            raise CapabilityMissing(
                f"the server at {self.base_url} has no /tokenize endpoint (HTTP {response.status_code}): the probe "
                "needs it to count prompt tokens (vLLM serves POST /tokenize)"
            )
        answer = self._checked("/tokenize", response)
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            keys = sorted(answer) if isinstance(answer, dict) else type(answer).__name__
            raise CapabilityMissing(
                f"the server at {self.base_url} answered POST /tokenize without a 'tokens' list of token ids "
                f"(it sent {keys}): it does not serve vLLM's /tokenize, which the probe needs to count prompt tokens"
            )
        return tokens

    def complete(self, request: CompletionRequest) -> list[Completion]:
        if request.json_schema is not None:
            return self._chat_json(request)
        body: dict[str, Any] = {
            **self._model(),
            "prompt": request.prompt if isinstance(request.prompt, str) else list(request.prompt),
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "n": request.n,
            "ignore_eos": request.ignore_eos,
            # the sampled tokens come back only with logprobs; ask vLLM to spell them as token ids
            "logprobs": request.logprobs if request.logprobs is not None else 0,
            "return_tokens_as_token_ids": True,
        }
        if request.seed is not None:
            body["seed"] = request.seed
        if request.stop:
            body["stop"] = list(request.stop)
        choices = _choices(self._post("/v1/completions", body), "/v1/completions", "text")
        completions = [self._choice(c) for c in choices]
        if request.logprobs is None:
            completions = [Completion(c.text, c.token_ids, c.finish_reason, None) for c in completions]
        return completions

    def _chat_json(self, request: CompletionRequest) -> list[Completion]:
        """JSON-schema requests use chat completions, where OpenAI defines ``response_format``."""
        if not isinstance(request.prompt, str):
            raise CapabilityMissing("JSON-schema requests over HTTP need a text prompt")
        body: dict[str, Any] = {
            **self._model(),
            "messages": [{"role": "user", "content": request.prompt}],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "n": request.n,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "probe", "schema": thaw(request.json_schema)},
            },
        }
        if request.seed is not None:
            body["seed"] = request.seed
        choices = _choices(self._post("/v1/chat/completions", body), "/v1/chat/completions", "message")
        return [
            Completion((c.get("message") or {}).get("content") or "", (), c.get("finish_reason") or "length")
            for c in choices
        ]

    def complete_batch(self, requests: Sequence[CompletionRequest]) -> list[list[Completion]]:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, min(len(requests), self.concurrency))) as pool:
            return list(pool.map(self.complete, requests))

    def next_token_logprobs(self, token_ids: Sequence[int]) -> np.ndarray:
        raise CapabilityMissing("an OpenAI-compatible server returns only the top-k of each distribution")

    def prompt_top_logprobs(self, token_ids: Sequence[int], k: int = 20) -> list[dict[int, float] | None]:
        """Teacher-forced top-``k`` logprobs of every prompt position (``echo`` + ``logprobs``):
        entry t is the distribution of token t given the tokens before it (entry 0 is None)."""
        body = {
            **self._model(),
            "prompt": list(token_ids),
            "max_tokens": 1,
            "temperature": 0.0,
            "echo": True,
            "logprobs": k,
            "return_tokens_as_token_ids": True,
        }
        choice = _choices(self._post("/v1/completions", body), "/v1/completions", "text")[0]
        tops = (choice.get("logprobs") or {}).get("top_logprobs")
        if not tops or len(tops) < len(token_ids):
            raise CapabilityMissing("the server did not echo the prompt's logprobs")
        return [
            None if top is None else {_token_id(t): float(v) for t, v in top.items()} for top in tops[: len(token_ids)]
        ]

    def speculative_counters(self) -> SpeculativeCounters | None:
        response = self._send("GET", "/metrics", lambda: self._client.get("/metrics"))
        if response.status_code != 200:
            raise TargetFailure(f"/metrics answered HTTP {response.status_code}: {response.text[:200]}")
        text = response.text
        values = {}
        for key in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
            pattern = rf"^[\w:]*spec_decode_{key}(?:_total)?(?:\{{[^}}]*\}})?\s+([0-9.eE+-]+)\s*$"
            found = [float(m.group(1)) for m in re.finditer(pattern, text, re.MULTILINE)]
            if not found:
                return None
            values[key] = int(sum(found))
        return SpeculativeCounters(values["num_drafts"], values["num_draft_tokens"], values["num_accepted_tokens"])

    # ---- helpers ---------------------------------------------------------------------------
    def _model(self) -> dict[str, Any]:
        return {"model": self.model} if self.model else {}

    def _choice(self, choice: Mapping[str, Any]) -> Completion:
        lp = choice.get("logprobs")
        token_ids: tuple[int, ...] = ()
        logprobs = None
        if lp and lp.get("tokens") is not None:
            token_ids = tuple(_token_id(t) for t in lp["tokens"])
            logprobs = tuple(
                TokenLogprob(tid, float(v), {_token_id(k): float(x) for k, x in (top or {}).items()})
                for tid, v, top in zip(
                    token_ids, lp["token_logprobs"], lp.get("top_logprobs") or [None] * len(token_ids)
                )
            )
        return Completion(choice["text"], token_ids, choice.get("finish_reason") or "length", logprobs)

    def _get(self, path: str) -> dict[str, Any]:
        return self._checked(path, self._send("GET", path, lambda: self._client.get(path)))

    def _post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._checked(path, self._send("POST", path, lambda: self._client.post(path, json=body)))

    def _send(self, method: str, path: str, call: Any) -> Any:
        """One request under the shared retry policy (fasttrack.targets.http); a request that
        still fails is the target's failure, never an item silently missing."""
        import httpx

        try:
            return send(method, path, call)
        except httpx.TransportError as exc:  # the connection, not the model: never a probe verdict
            raise TargetUnreachable(
                f"{method} {path}: the connection failed after the retries ({type(exc).__name__}: {exc})"
            ) from exc
        except httpx.HTTPError as exc:
            raise TargetFailure(f"{method} {path} failed: {type(exc).__name__}: {exc}") from exc

    @staticmethod
    def _checked(path: str, response: Any) -> dict[str, Any]:
        if 400 <= response.status_code < 500:
            raise RequestRefused(f"{path} answered HTTP {response.status_code}: {response.text[:200]}")
        if response.status_code >= 400:
            raise TargetFailure(f"{path} answered HTTP {response.status_code}: {response.text[:200]}")
        try:
            return response.json()
        except ValueError:
            raise TargetContractError(
                f"{path} answered HTTP {response.status_code} with no JSON: {response.text[:200]}"
            ) from None


def _choices(answer: Any, path: str, field: str) -> list[Mapping[str, Any]]:
    """The ``choices`` of an OpenAI answer in ``index`` order; TargetContractError naming what is
    missing when the answer is not one (so that no probe judges a misread answer)."""
    choices = answer.get("choices") if isinstance(answer, Mapping) else None
    if not isinstance(choices, list) or not choices or not all(isinstance(c, Mapping) for c in choices):
        raise TargetContractError(f"{path} answered without a list of choices: {str(answer)[:200]}")
    if any(field not in c for c in choices):
        raise TargetContractError(f"{path} answered a choice without {field!r}: {str(choices[0])[:200]}")
    return sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c.get("index"), int) else 0)


def _token_id(token: str) -> int:
    """``token_id:123`` (vLLM's return_tokens_as_token_ids) as 123; other spellings hash stably."""
    if isinstance(token, str) and token.startswith("token_id:"):
        return int(token.split(":", 1)[1])
    return -1 - zlib.crc32(str(token).encode("utf-8"))
