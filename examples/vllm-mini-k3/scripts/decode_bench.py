"""Decode time per step of one or more running servers, interleaved, per batch size.

    python examples/vllm-mini-k3/scripts/decode_bench.py URL [URL ...] --batch 1,8,64 --pairs 5

For a batch size B, B streaming requests with distinct random 64-token prompts are sent at once,
each with ``ignore_eos`` and a fixed length; a decode step's time is the median over the requests
of each one's time per streamed token from its 3rd token on (prefills of the batch are over by
then). The servers take
turns (A, B, A, B, ...), so load from other processes on the host falls on every side alike. The
ratio of each pair (first URL / other URL) is printed with the median: > 1 means the other URL
decodes faster than the first.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.request import Request, urlopen


def stream_step(url: str, model: str, prompt: list[int], max_tokens: int) -> float:
    """Mean seconds per streamed token of one request, from its 3rd token to its last."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "min_tokens": max_tokens,
            "ignore_eos": True, "temperature": 0.0, "stream": True}
    req = Request(f"{url}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    stamps: list[float] = []
    with urlopen(req, timeout=600) as resp:
        for line in resp:
            if line.startswith(b"data: {"):
                stamps.append(time.perf_counter())
    if len(stamps) != max_tokens:
        raise RuntimeError(f"{url}: asked for {max_tokens} streamed tokens, got {len(stamps)}")
    # the mean over the span, not gap by gap: a client thread that reads late bunches a few
    # tokens together, which moves single gaps but hardly the span
    return (stamps[-1] - stamps[2]) / (len(stamps) - 3)


def step_time(url: str, model: str, batch: int, rng: random.Random, tokens: int) -> float:
    """Median over B concurrent requests of their time per token: one decode step at batch B."""
    prompts = [[rng.randrange(256) for _ in range(64)] for _ in range(batch)]
    with ThreadPoolExecutor(batch) as pool:
        return statistics.median(pool.map(lambda p: stream_step(url, model, p, tokens), prompts))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("urls", nargs="+")
    ap.add_argument("--batch", default="1,8,64")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=32, help="tokens per request")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    urls = [u.rstrip("/") for u in args.urls]
    models = {u: json.loads(urlopen(f"{u}/v1/models", timeout=30).read())["data"][0]["id"] for u in urls}
    rng = random.Random(args.seed)
    for u in urls:  # warm-up: first requests pay one-time costs
        step_time(u, models[u], 2, rng, 4)
    report = {}
    for batch in (int(b) for b in args.batch.split(",")):
        times: dict[str, list[float]] = {u: [] for u in urls}
        for i in range(args.pairs):
            order = urls if i % 2 == 0 else urls[::-1]  # alternate who goes first
            for u in order:
                times[u].append(step_time(u, models[u], batch, rng, args.tokens))
        row = {u: {"median_ms": round(1e3 * statistics.median(t), 3), "ms": [round(1e3 * x, 3) for x in t]}
               for u, t in times.items()}
        for u in urls[1:]:
            ratios = [a / b for a, b in zip(times[urls[0]], times[u])]
            row[u]["speedup_vs_first"] = round(statistics.median(ratios), 3)
            row[u]["speedups"] = [round(r, 3) for r in ratios]
        report[f"batch{batch}"] = row
        print(json.dumps({f"batch{batch}": row}), file=sys.stderr)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
