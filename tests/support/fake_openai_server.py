"""A tiny stdlib OpenAI-compatible server for the server-target tests.

python fake_openai_server.py --port P [--exit-now] [--never-healthy] [--broken-logits] [--version V]
    [--enable-eplb]

With --fast among its flags it logs the line a new backend prints when it is chosen ("Using
the fast decode backend"), unless FAKE_FAST_FALLBACK is set (a silent fallback to stock).

--enable-eplb is refused with a message and exit code 1 (a combination the switch must refuse),
unless FAKE_ACCEPTS_EPLB is set (then it serves: the planted fault) or FAKE_EPLB_CRASH (then it
exits 1 with another message: a crash, not a refusal).
"""

import argparse
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--exit-now", action="store_true")
    ap.add_argument("--never-healthy", action="store_true")
    ap.add_argument("--broken-logits", action="store_true")
    ap.add_argument("--version", default=None, help="answer GET /version as vLLM does")
    ap.add_argument("--enable-eplb", action="store_true")
    args, switches = ap.parse_known_args()  # switch flags (--fast ...) are accepted and change no answer
    print(f"fake server starting on {args.port}; offline={os.environ.get('HF_HUB_OFFLINE')}", flush=True)
    if "--fast" in switches and not os.environ.get("FAKE_FAST_FALLBACK"):
        print("INFO layer.py:88] Using the fast decode backend", flush=True)
    if args.enable_eplb and not os.environ.get("FAKE_ACCEPTS_EPLB"):
        crash = os.environ.get("FAKE_EPLB_CRASH")
        print("Segmentation fault" if crash else "ValueError: EPLB is not supported with the fast backend", flush=True)
        sys.exit(1)
    if args.exit_now:
        print("fatal: cannot load weights", flush=True)
        sys.exit(3)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *a):
            print("request:", fmt % a, flush=True)

        def _send(self, code, obj):
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/health" and not args.never_healthy:
                self._send(200, {"status": "ok"})
            elif self.path == "/version" and args.version:
                self._send(200, {"version": args.version})
            else:
                self._send(503, {"status": "starting"})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            finish = "error" if args.broken_logits else "stop"
            if self.path == "/v1/completions":
                self._send(
                    200, {"choices": [{"text": f"echo:{body['prompt']}:{body.get('seed')}", "finish_reason": finish}]}
                )
            elif self.path == "/v1/chat/completions":
                last = body["messages"][-1]["content"]
                self._send(
                    200,
                    {
                        "choices": [
                            {"message": {"role": "assistant", "content": f"chat:{last}"}, "finish_reason": finish}
                        ]
                    },
                )
            else:
                self._send(404, {"error": "no such path"})

    # a backlog as deep as a real server's: the default 5 resets connections when the gate's
    # concurrent requests outrun the accept loop on a loaded host (tests/support/http_server.py)
    ThreadingHTTPServer.request_queue_size = 1024
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
