"""A fault-injecting HTTP proxy for tests: in front of a server it answers some requests 500,
drops some connections without an answer, and delays some past the client's timeout, at a
seeded rate, and records every fault it injected (path and kind).

    with FlakyProxy("http://127.0.0.1:8000", rate=0.05, seed=7, delay_s=3.0) as proxy:
        ... requests to proxy.url ...
    proxy.faults  # [("POST", "/v1/completions", "500"), ...]
    proxy.slow_answers  # [("POST", "/v1/completions", 4.3), ...]: forwarded, but slow upstream

The fault sequence depends only on the seed and the order requests arrive in: request k gets
fault k of the sequence, so the number of faults over a run is fixed by the seed. What the seed
cannot fix is the host: on a loaded machine a request the proxy did not fault can still take
longer than the client waits. The proxy records every forwarded request whose upstream answer
took at least ``slow_after_s``, so a test can tell such a genuine timeout from a miscounted one.
"""

from __future__ import annotations

import random
import socket
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from typing import Any

from support.http_server import DeepBacklogHTTPServer

KINDS = ("500", "drop", "slow")


class FlakyProxy:
    def __init__(
        self,
        upstream: str,
        *,
        rate: float = 0.05,
        seed: int = 0,
        delay_s: float = 3.0,
        kinds: tuple[str, ...] = KINDS,
        only: tuple[str, ...] = (),  # paths to fault (empty: every path)
        slow_after_s: float = float("inf"),  # record forwarded answers at least this slow
    ):
        self.upstream = upstream.rstrip("/")
        self.rate, self.delay_s, self.kinds, self.only = rate, delay_s, kinds, only
        self.faults: list[tuple[str, str, str]] = []
        self.slow_after_s = slow_after_s
        self.slow_answers: list[tuple[str, str, float]] = []
        self.requests = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._server = DeepBacklogHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FlakyProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _fault_for(self, method: str, path: str) -> str | None:
        with self._lock:
            self.requests += 1
            draw, kind = self._rng.random(), self._rng.choice(self.kinds)
            if draw >= self.rate or (self.only and path.split("?", 1)[0] not in self.only):
                return None
            self.faults.append((method, path, kind))
            return kind

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self, method: str) -> None:
                started = time.monotonic()
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                fault = proxy._fault_for(method, self.path)
                if fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)  # no answer at all: a dropped connection
                    return
                if fault == "500":
                    self._answer(500, b'{"error": "injected fault"}', "application/json")
                    return
                if fault == "slow":
                    time.sleep(proxy.delay_s)  # past the client's timeout: it has given up on this one
                try:
                    self._relay(method, body)
                finally:
                    took = time.monotonic() - started
                    if fault is None and took >= proxy.slow_after_s:
                        with proxy._lock:
                            proxy.slow_answers.append((method, self.path, took))

            def _relay(self, method: str, body: bytes | None) -> None:
                request = urllib.request.Request(proxy.upstream + self.path, data=body, method=method)
                if self.headers.get("Content-Type"):
                    request.add_header("Content-Type", self.headers["Content-Type"])
                try:
                    with urllib.request.urlopen(request, timeout=60) as answer:
                        self._answer(answer.status, answer.read(), answer.headers.get("Content-Type", "text/plain"))
                except urllib.error.HTTPError as err:
                    self._answer(err.code, err.read(), err.headers.get("Content-Type", "text/plain"))
                except OSError:
                    self.close_connection = True

            def _answer(self, code: int, data: bytes, kind: str) -> None:
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (a slow answer): nothing to tell it
                    self.close_connection = True

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        return Handler
