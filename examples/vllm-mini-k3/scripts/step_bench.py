"""What each technique does to a decode step's time, in-process, stock and variants interleaved.

    python examples/vllm-mini-k3/scripts/step_bench.py [--batch 1,8,64] [--dtype float32]

Builds vLLM's stock DeepseekV3ForCausalLM and the plugin's model with all techniques and with
each technique alone (``VLLM_MINI_K3_DISABLE``), then times the model's forward for B tokens at
B different positions, i.e. one decode step at batch B without the server around it. The
attention kernel itself is replaced on every variant by the same stub (each token attends to
itself only): the plugin does not touch it, and no KV cache is needed. Variants take turns,
order rotating every round; per variant the minimum over rounds of the mean of ``--calls``
forwards is kept (the least disturbed by other processes on a shared host) and the median over
rounds of each variant's ratio to stock and to "none" (the plugin's class, every technique off).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from vllm_mini_k3 import DISABLE, TECHNIQUES
from vllm_mini_k3.export import ensure_checkpoint
from vllm_mini_k3.inprocess import build_model, vllm_session


class SelfAttentionStub(torch.nn.Module):
    """Stands in for vLLM's Attention layer: each token's output is its own value vector."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return v


def stub_attention(model: torch.nn.Module) -> torch.nn.Module:
    for layer in model.model.layers:
        layer.self_attn.attn = SelfAttentionStub()
    return model


def build_variants(config: Any) -> dict[str, torch.nn.Module]:
    from vllm_mini_k3.model import MiniK3LatencyForCausalLM

    variants = {"stock": stub_attention(build_model(config, name="stock"))}
    # "none": the plugin's class with every technique off, built like the others: the baseline
    # the techniques are compared with (a separately built stock model came out 4-6 % slower
    # than identical code in the plugin's models, an artefact of where its weights landed)
    for name in ("none", "all", *TECHNIQUES):
        keep = {"none": (), "all": TECHNIQUES}.get(name, (name,))
        os.environ[DISABLE] = ",".join(t for t in TECHNIQUES if t not in keep)
        variants[name] = stub_attention(build_model(config, MiniK3LatencyForCausalLM, name=name))
    os.environ.pop(DISABLE, None)
    return variants


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", default="1,8,64")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1, help="a vLLM CPU worker on this host runs one")
    ap.add_argument("--out", type=Path, help="also write the report here (vLLM logs to stdout too)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    report: dict[str, Any] = {"load": Path("/proc/loadavg").read_text().split()[:3]}
    with vllm_session(ensure_checkpoint(), args.dtype) as config, torch.no_grad():
        variants = build_variants(config)
        names = list(variants)
        for batch in (int(b) for b in args.batch.split(",")):
            ids = torch.randint(0, 256, (batch,))
            positions = torch.randint(16, 2048, (batch,))
            ref = variants["stock"](ids, positions)
            times: dict[str, list[float]] = {n: [] for n in names}
            for name in names:  # warm-up and a correctness spot check
                diff = (variants[name](ids, positions) - ref).abs().max().item()
                if diff > (1e-3 if args.dtype == "float32" else 0.25):
                    raise SystemExit(f"{name} at batch {batch}: hidden states differ from stock by {diff}")
            for r in range(args.rounds):
                order = names[r % len(names):] + names[: r % len(names)]
                for name in order:
                    t0 = time.perf_counter()
                    for _ in range(args.calls):
                        variants[name](ids, positions)
                    times[name].append((time.perf_counter() - t0) / args.calls * 1e3)
            row = {}
            for name in names:
                row[name] = {"min_ms": round(min(times[name]), 3), "median_ms": round(statistics.median(times[name]), 3)}
                for base in ("stock", "none"):
                    ratios = [s / t for s, t in zip(times[base], times[name])]
                    row[name][f"vs_{base}"] = round(statistics.median(ratios), 3)
            report[f"batch{batch}"] = row
            print(json.dumps({f"batch{batch}": row}), file=sys.stderr)
    report["load_after"] = Path("/proc/loadavg").read_text().split()[:3]
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
