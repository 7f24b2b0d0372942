"""Requests to a target server, and the one retry policy every client of the gate uses
(``OpenAITarget`` for evals and the proof of path, ``OpenAIProbeTarget`` for probes, the
speculative check and benchmarks, the proof counter's ``/metrics`` scrape).

A real server is flaky now and then: a request answered 500/502/503/504, a connection dropped,
an answer slower than the client's timeout. Such a request is retried, at most
``MAX_RETRIES`` times with a short growing pause, when it is safe to send again: a GET, or a
POST to an inference endpoint (``RETRIED_POSTS``), which changes nothing the gate reads back
except counters that only grow (a retried completion adds decode steps the proof of path counts,
and it only asks whether the path ran at all). Other requests and client errors (4xx: the
server says it cannot do that) are never retried. When the retries run out the last answer or
error goes to the caller, which fails the request: a check never passes with an item missing.

Every retry is counted in ``LEDGER`` (per process: the engine runs each check in its own
worker process, which records the count and reasons on the check's outcomes, ``retries``).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

MAX_RETRIES = 3
BACKOFF_S = (0.1, 0.3, 0.9)  # pause before retry 1, 2, 3
RETRIED_STATUS = frozenset({500, 502, 503, 504})
RETRIED_POSTS = frozenset({"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"})
DEFAULT_TIMEOUT_S = 300.0  # per request; the manifest's target.openai.request_timeout_s overrides it


class RetryLedger:
    """How many requests were retried, and why ("POST /v1/completions: HTTP 500": 2)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reasons: Counter[str] = Counter()

    def note(self, reason: str) -> None:
        with self._lock:
            self._reasons[reason] += 1

    def reset(self) -> None:
        with self._lock:
            self._reasons.clear()

    def snapshot(self) -> dict[str, Any] | None:
        """``{"count": n, "reasons": {...}}``, or None when nothing was retried."""
        with self._lock:
            if not self._reasons:
                return None
            return {"count": sum(self._reasons.values()), "reasons": dict(sorted(self._reasons.items()))}


LEDGER = RetryLedger()

_CLIENT: httpx.Client | None = None
_CLIENT_LOCK = threading.Lock()


def shared_client() -> httpx.Client:
    """This process's one HTTP client for servers' health polls: a client made per poll builds a
    TLS context each time, ~20 ms of CPU, which was 17 CPU-s of the engine's health polls in one
    main job on the 2-core host, taken from the vLLM servers it waited for. Only the polls use it;
    the checks' concurrent requests keep a client per request, each on its own connection."""
    global _CLIENT
    with _CLIENT_LOCK:
        if _CLIENT is None:
            import httpx

            # No kept-alive connections: each request opens its own, as a client per request did
            # (a pooled connection the server has since closed would be an extra, spurious retry).
            _CLIENT = httpx.Client(limits=httpx.Limits(max_connections=None, max_keepalive_connections=0))
        return _CLIENT


def _forget_client() -> None:
    """A forked child must not share its parent's connections: it makes its own client."""
    global _CLIENT, _CLIENT_LOCK
    _CLIENT, _CLIENT_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_client)


def retryable(method: str, path: str) -> bool:
    path = path.split("?", 1)[0]
    return method.upper() in ("GET", "HEAD") or (method.upper() == "POST" and path in RETRIED_POSTS)


def send(method: str, path: str, call: Callable[[], httpx.Response]) -> httpx.Response:
    """``call()`` (one request to ``path``) under the retry policy; its last answer, or its
    last transport error raised."""
    import httpx

    safe = retryable(method, path)
    for attempt in range(MAX_RETRIES + 1):
        last_try = attempt == MAX_RETRIES or not safe
        try:
            response = call()
        except httpx.TransportError as exc:  # refused, dropped, timed out
            if last_try:
                raise
            LEDGER.note(f"{method.upper()} {path}: {type(exc).__name__}")
        else:
            if response.status_code not in RETRIED_STATUS or last_try:
                return response
            LEDGER.note(f"{method.upper()} {path}: HTTP {response.status_code}")
        time.sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
    raise AssertionError("unreachable")  # the loop returns or raises on its last attempt
