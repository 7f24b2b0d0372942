"""#35 row 8: a server whose answers are cut short is errored(target) with its retries recorded,
never a probe's FAIL; a server that answers without logprobs lacks a feature, it did not crash."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fasttrack.probes.adapters import OpenAIProbeTarget
from fasttrack.probes.base import CompletionRequest, TargetFailure, TargetUnreachable
from fasttrack.targets.http import LEDGER

pytest.importorskip("httpx")


def serve(mode: str) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.dumps({"choices": [{"index": 0, "text": " hello", "finish_reason": "length"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:10] if mode == "truncate" else body)  # truncate: the body cut short
            self.wfile.flush()
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture
def truncating() -> Iterator[str]:
    yield from serve("truncate")


@pytest.fixture
def without_logprobs() -> Iterator[str]:
    yield from serve("plain")


def test_a_truncated_answer_is_unreachable_not_a_failure_and_its_retries_are_recorded(truncating):
    LEDGER.reset()
    target = OpenAIProbeTarget(truncating, max_context=128, timeout_s=10)
    with pytest.raises(TargetUnreachable, match="POST /v1/completions: the connection failed after the retries") as err:
        target.complete(CompletionRequest((1, 2, 3), max_tokens=2, temperature=0.0))
    assert not isinstance(err.value, TargetFailure)  # no probe turns it into a FAIL
    retries = LEDGER.snapshot()
    assert retries is not None and retries["count"] == 3  # every retry the policy allows, each recorded


def test_an_answer_without_logprobs_has_no_token_ids(without_logprobs):
    target = OpenAIProbeTarget(without_logprobs, max_context=128, timeout_s=10)
    out = target.complete(CompletionRequest((1, 2, 3), max_tokens=2, temperature=0.0))[0]
    assert out.text == " hello" and out.token_ids == ()  # what full_context now names as a missing feature
