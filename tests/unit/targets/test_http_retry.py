"""The one retry policy (fasttrack.targets.http): what is retried, how often, and the ledger."""

from __future__ import annotations

import httpx
import pytest

from fasttrack.targets import http


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch):
    monkeypatch.setattr(http.time, "sleep", lambda s: None)
    http.LEDGER.reset()


def client(answers: list) -> tuple[httpx.Client, list[str]]:
    """A client whose server answers in turn: an int status, or an exception to raise."""
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        answer = answers.pop(0) if answers else 200
        if isinstance(answer, Exception):
            raise answer
        return httpx.Response(answer, json={"ok": answer == 200})

    return httpx.Client(base_url="http://server", transport=httpx.MockTransport(handler)), seen


def test_a_safe_request_is_retried_until_it_succeeds_and_counted():
    c, seen = client([500, httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("dropped")])
    response = http.send("POST", "/v1/completions", lambda: c.post("/v1/completions", json={}))
    assert response.status_code == 200 and len(seen) == 4
    assert http.LEDGER.snapshot() == {
        "count": 3,
        "reasons": {
            "POST /v1/completions: HTTP 500": 1,
            "POST /v1/completions: ReadTimeout": 1,
            "POST /v1/completions: RemoteProtocolError": 1,
        },
    }


def test_retries_are_bounded_and_the_last_answer_or_error_goes_back():
    c, seen = client([503] * 10)
    assert http.send("GET", "/metrics", lambda: c.get("/metrics")).status_code == 503
    assert len(seen) == 1 + http.MAX_RETRIES
    c, seen = client([httpx.ConnectError("refused")] * 10)
    with pytest.raises(httpx.ConnectError):
        http.send("GET", "/metrics", lambda: c.get("/metrics"))
    assert len(seen) == 1 + http.MAX_RETRIES


def test_client_errors_and_unsafe_requests_are_not_retried():
    c, seen = client([404])
    assert http.send("POST", "/tokenize", lambda: c.post("/tokenize", json={})).status_code == 404
    c, seen = client([500])
    assert http.send("POST", "/v1/load_lora_adapter", lambda: c.post("/v1/load_lora_adapter")).status_code == 500
    assert len(seen) == 1 and http.LEDGER.snapshot() is None
