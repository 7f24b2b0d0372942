"""Operators per decode step from vLLM's torch profiler, for one or more running servers.

    python examples/vllm-mini-k3/scripts/census.py URL=TRACE_DIR [URL=TRACE_DIR ...] --batch 1,8

Each server must run with ``--profiler-config '{"profiler":"torch","torch_profiler_dir":
"TRACE_DIR","torch_profiler_with_stack":false,"ignore_frontend":true}'``. The census is the gate's
own (`fasttrack.targets.profiler.ServerProfiler`, what a `vllm` or `openai` target started with
the profiler gives the benchmarks' census proof): per batch size B it posts ``/start_profile``,
sends one request for B sampled sequences (``n``) of ``--tokens`` + 1 tokens, posts
``/stop_profile``, reads the trace the worker wrote and counts the operators of every decode step
(``execute_context_0(0)_generation_B(B)``): all, top level, and which. Printed per server: the
medians, the per-layer figure (the checkpoint's 5 layers), and the operators whose per-step count
differs most between the first server and each other one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from fasttrack.targets.profiler import ServerProfiler, differing_operators

LAYERS = 5  # examples/vllm-mini-k3/checkpoint/config.json num_hidden_layers


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("servers", nargs="+", help="URL=TRACE_DIR")
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--tokens", type=int, default=8)
    args = ap.parse_args(argv)
    servers = [(u.rstrip("/"), Path(d)) for u, d in (s.split("=", 1) for s in args.servers)]
    report: dict[str, Any] = {"load": Path("/proc/loadavg").read_text().split()[:3]}
    for batch in (int(b) for b in args.batch.split(",")):
        rows = {url: ServerProfiler(url, d, n_layers=LAYERS).decode_census(batch, args.tokens) for url, d in servers}
        first = rows[servers[0][0]]["kernel_names"]
        for url, _ in servers[1:]:
            rows[url]["differs_from_first"] = differing_operators(first, rows[url]["kernel_names"], top=20)
        report[f"batch{batch}"] = rows
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
