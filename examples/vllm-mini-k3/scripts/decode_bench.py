"""Decode time per step of one or more running servers, interleaved, per batch size.

    python examples/vllm-mini-k3/scripts/decode_bench.py URL [URL ...] --batch 1,8,64 --pairs 5

For a batch size B, B requests with distinct random 64-token prompts are sent at once, each with
``ignore_eos`` and a fixed length; a decode step's time is the mean over them of vLLM's own
``vllm:request_time_per_output_token_seconds`` (from /metrics, before and after): timed in the
server, so a client thread scheduled late on a busy host does not move it. The servers take
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
from concurrent.futures import ThreadPoolExecutor
from urllib.request import Request, urlopen

TPOT = "vllm:request_time_per_output_token_seconds"


def tpot_totals(url: str) -> tuple[float, float]:
    """(sum, count) of vLLM's per-request time per output token histogram on /metrics."""
    total = count = 0.0
    for line in urlopen(f"{url}/metrics", timeout=30).read().decode().splitlines():
        if line.startswith(TPOT + "_sum{"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith(TPOT + "_count{"):
            count += float(line.rsplit(" ", 1)[1])
    return total, count


def one_request(url: str, model: str, prompt: list[int], max_tokens: int) -> None:
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "min_tokens": max_tokens,
            "ignore_eos": True, "temperature": 0.0}
    req = Request(f"{url}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    n = json.loads(urlopen(req, timeout=600).read())["usage"]["completion_tokens"]
    if n != max_tokens:
        raise RuntimeError(f"{url}: asked for {max_tokens} tokens, got {n}")


def step_time(url: str, model: str, batch: int, rng: random.Random, tokens: int) -> float:
    """Mean over B concurrent requests of the server's own time per output token (its decode
    time over its tokens after the first): one decode step at batch B, timed by the server."""
    prompts = [[rng.randrange(256) for _ in range(64)] for _ in range(batch)]
    s0, c0 = tpot_totals(url)
    with ThreadPoolExecutor(batch) as pool:
        list(pool.map(lambda p: one_request(url, model, p, tokens), prompts))
    s1, c1 = tpot_totals(url)
    if c1 - c0 != batch:
        raise RuntimeError(f"{url}: {c1 - c0} requests in the TPOT histogram, expected {batch}")
    return (s1 - s0) / (c1 - c0)


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
