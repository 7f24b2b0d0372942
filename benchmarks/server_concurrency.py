"""Items per second an eval and a probe get from an OpenAI-compatible server at concurrency 1 and
64 (``target.openai.concurrency``): the example's server (``python -m mini_k3.server``), which
batches whatever requests have queued up while it was busy.

Eval-shaped: ``OpenAITarget.generate`` (what the evals' lm-eval adapter calls) on N chat-free
completion requests; probe-shaped: ``OpenAIProbeTarget.complete_batch`` with logprobs. Both
sides of a real check send the same; only the client's concurrency changes here.

    python benchmarks/server_concurrency.py [--items 64] [--max-tokens 16] [--concurrency 1,64]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fasttrack.probes.adapters import OpenAIProbeTarget
from fasttrack.probes.base import CompletionRequest
from fasttrack.targets.openai.client import OpenAITarget
from fasttrack.targets.openai.server import ManagedServer, ServerSpec


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--concurrency", default="1,64")
    ap.add_argument("--threads", type=int, default=1, help="the server's torch threads")
    args = ap.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    command = (sys.executable, "-m", "mini_k3.server", "--port", "{port}", "--threads", str(args.threads))
    spec = ServerSpec("baseline", command=command, cwd=str(REPO / "examples" / "mini-k3"), startup_timeout_s=300)
    prompts = [f"Item {i}: the weather in city number {i} is" for i in range(args.items)]
    with tempfile.TemporaryDirectory() as logs, ManagedServer(spec, Path(logs)) as server:
        url = str(server.base_url)
        OpenAITarget(url, concurrency=8).generate([{"prompt": "warm up", "max_tokens": 4}] * 8)
        print(f"mini_k3.server, {args.items} items x {args.max_tokens} greedy tokens, load {os.getloadavg()[0]:.1f}")
        for level in levels:
            client = OpenAITarget(url, concurrency=level)
            requests = [{"prompt": p, "max_tokens": args.max_tokens, "temperature": 0.0, "seed": 1} for p in prompts]
            started = time.perf_counter()
            client.generate(requests)
            eval_rate = args.items / (time.perf_counter() - started)
            probe = OpenAIProbeTarget(url, concurrency=level)
            batch = [CompletionRequest(p, max_tokens=args.max_tokens, logprobs=1) for p in prompts]
            started = time.perf_counter()
            probe.complete_batch(batch)
            probe_rate = args.items / (time.perf_counter() - started)
            print(f"concurrency {level:>3}: evals {eval_rate:6.2f} items/s, probes {probe_rate:6.2f} items/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
