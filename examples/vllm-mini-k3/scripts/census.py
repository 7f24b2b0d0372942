"""Operators per decode step from vLLM's torch profiler, for one or more running servers.

    python examples/vllm-mini-k3/scripts/census.py URL=TRACE_DIR [URL=TRACE_DIR ...] --batch 1,8

Each server must run with ``--profiler-config '{"profiler":"torch","torch_profiler_dir":
"TRACE_DIR","torch_profiler_with_stack":false,"ignore_frontend":true}'``. Per batch size B this
posts ``/start_profile``, sends one request for B sampled sequences (``n``) of 8 tokens,
posts ``/stop_profile`` and reads the newest ``*.pt.trace.json.gz`` the worker wrote. vLLM's
model runner marks each step with a ``user_annotation`` named
``execute_context_<n>(<tokens>)_generation_<m>(<tokens>)``; a decode step is one with no
context (prefill) part and B generation tokens. Per such step it counts the ``cpu_op`` events
inside it (all, and top-level: not nested in another operator) and lists the top-level
operators; printed per server: the median counts, the operators whose per-step count differs
between the first server and each other one, and the profiling costs (seconds for start,
requests and stop, trace bytes).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

STEP = re.compile(r"execute_context_0\(0\)_generation_(\d+)\((\d+)\)")


def post(url: str, body: dict[str, Any] | None = None) -> bytes:
    req = Request(url, json.dumps(body or {}).encode(), {"Content-Type": "application/json"}, method="POST")
    with urlopen(req, timeout=600) as r:
        return r.read()


def decode_steps(trace: Path, batch: int) -> list[dict[str, Any]]:
    with gzip.open(trace) as f:
        events = json.load(f)["traceEvents"]
    steps = [e for e in events if e.get("cat") == "user_annotation" and (m := STEP.fullmatch(e["name"]))
             and int(m.group(1)) == batch]
    ops = sorted((e for e in events if e.get("cat") == "cpu_op"), key=lambda e: (e["ts"], -e["dur"]))
    out = []
    for s in steps:
        lo, hi = s["ts"], s["ts"] + s["dur"]
        inside = [e for e in ops if lo <= e["ts"] and e["ts"] + e["dur"] <= hi]
        top, end = [], float("-inf")
        for e in inside:
            if e["ts"] >= end:
                top.append(e["name"])
                end = e["ts"] + e["dur"]
        out.append({"all": len(inside), "top": len(top), "ops": collections.Counter(top), "ms": s["dur"] / 1e3})
    return out


def profile(url: str, trace_dir: Path, batch: int, tokens: int) -> dict[str, Any]:
    model = json.loads(urlopen(f"{url}/v1/models", timeout=30).read())["data"][0]["id"]
    before = set(trace_dir.glob("*.pt.trace.json.gz"))
    t0 = time.perf_counter()
    post(f"{url}/start_profile")
    t1 = time.perf_counter()
    # one request with n = B: its B sequences decode together from the first step (B separate
    # requests arrive staggered and mostly decode alone); sampled, since greedy copies are equal
    body = {"model": model, "prompt": [256, 260] + list(b"write a poem about tapirs") + [262, 261], "n": batch,
            "max_tokens": tokens, "min_tokens": tokens, "ignore_eos": True, "temperature": 1.0, "seed": 0}
    post(f"{url}/v1/completions", body)
    t2 = time.perf_counter()
    post(f"{url}/stop_profile")
    t3 = time.perf_counter()
    for _ in range(100):  # the worker writes the trace after stop returns
        new = set(trace_dir.glob("*.pt.trace.json.gz")) - before
        if new:
            break
        time.sleep(0.2)
    if not new:
        raise RuntimeError(f"{url}: no new trace in {trace_dir}")
    trace = max(new, key=lambda p: p.stat().st_mtime)
    time.sleep(0.5)  # let the writer finish
    steps = decode_steps(trace, batch)
    if not steps:
        raise RuntimeError(f"{url}: no decode step of batch {batch} in {trace.name}")
    ops: collections.Counter[str] = collections.Counter()
    for s in steps:
        ops.update(s["ops"])
    return {"steps": len(steps), "cpu_ops_per_step": statistics.median(s["all"] for s in steps),
            "top_level_ops_per_step": statistics.median(s["top"] for s in steps),
            "ms_per_profiled_step": round(statistics.median(s["ms"] for s in steps), 2),
            "ops_per_step": {k: round(v / len(steps), 2) for k, v in ops.most_common()},
            "seconds": {"start": round(t1 - t0, 2), "requests": round(t2 - t1, 2), "stop": round(t3 - t2, 2)},
            "trace_bytes": trace.stat().st_size}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("servers", nargs="+", help="URL=TRACE_DIR")
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--tokens", type=int, default=8)
    args = ap.parse_args(argv)
    servers = [(u.rstrip("/"), Path(d)) for u, d in (s.split("=", 1) for s in args.servers)]
    report: dict[str, Any] = {"load": Path("/proc/loadavg").read_text().split()[:3]}
    for batch in (int(b) for b in args.batch.split(",")):
        rows = {url: profile(url, d, batch, args.tokens) for url, d in servers}
        first = rows[servers[0][0]]["ops_per_step"]
        for url, _ in servers[1:]:
            other = rows[url]["ops_per_step"]
            rows[url]["differs_from_first"] = {k: [first.get(k, 0), other.get(k, 0)] for k in sorted(set(first) | set(other))
                                               if first.get(k, 0) != other.get(k, 0)}
        report[f"batch{batch}"] = rows
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
