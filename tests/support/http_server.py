"""The tests' threaded HTTP servers, with a listen backlog as deep as a real server's.

``http.server``'s default backlog is 5 connections. The gate opens up to 64 at once (a side's
request concurrency), and on a loaded host the accept loop falls behind: the kernel then drops
handshakes and resets connections, and the client sees ReadErrors, drops and timeouts that no
injected fault explains (64 clients at once, no faults: 34 ReadErrors in 1,280 requests with the
default backlog, none with 1,024). uvicorn, which vLLM serves through, listens with 2,048.
"""

from __future__ import annotations

from http.server import ThreadingHTTPServer

BACKLOG = 1024


class DeepBacklogHTTPServer(ThreadingHTTPServer):
    request_queue_size = BACKLOG
    daemon_threads = True
