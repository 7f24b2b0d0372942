"""Issue #22 diagnostic: do identical rows of one batch decode alike on the latency path?

The gate's n>1 probe found, on an H200 in bf16, that the candidate's 4 rows of one greedy n=4
request came out different. This script looks for the cause in one run (the device time is
scarce), in three parts:

1. kernels: each GPU kernel the decode step uses (Triton GEMV, cuBLAS linear, the attention's
   batched products) on a batch of identical rows: do all rows get the same bits?
2. model: the shipped weights, identical prompt rows, stock prefill, then decode steps that feed
   every row the same token, for every batch size: the spread (max |row - row 0|) of the logits
   per configuration (stock; the candidate with every technique; one technique off at a time;
   CUDA graphs on / off; the graph-safe step eagerly; the host-synchronising MoE form).
   Every configuration gets a new decoder (no graphs from before) and a new cache per batch
   size: this isolates arithmetic.
3. engine: the n>1 probe's own request sequence on one engine (per prompt: a seeded sampled
   n=4 request twice, then a greedy n=4 request), with the CUDA-graph decoder keyed as before
   the fix (on ``c_kv.data_ptr()``) and as after it, and with graphs off.

    PYTHONPATH=examples/mini-k3 python3 examples/mini-k3/tests/diagnostics/batch_invariance_probe.py \\
        --device cuda --out /tmp/probe.json

On a CPU (``--device cpu``) there is no Triton kernel and no graph mode; it runs as a smoke test.
tests/diagnostics/h200_issue22.sh runs it on the H200 with the kernel tests; the figures of that
run are in the README ("Issue #22").
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import OrderedDict
from typing import Any

import torch

from mini_k3.engine import Engine, GenerationRequest
from mini_k3.latency import LatencyDecoder, LatencyOptions, latency_forward
from mini_k3.latency import graphs as graphs_module
from mini_k3.model import load_pretrained
from mini_k3.parallel import single_rank

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
PROMPTS = ["The weather today is", "Once upon a time, there was a", "def fibonacci(n):\n"]  # the probe's first three
STEPS = 16


def spread(t: torch.Tensor) -> float:
    """Largest |row - row 0| over a ``[B, ...]`` tensor (0.0: all rows carry the same bits)."""
    t = t.float()
    return float((t - t[:1]).abs().max()) if t.shape[0] > 1 else 0.0


# ---- 1. kernels -------------------------------------------------------------------------------
def kernel_rows(device: str) -> dict[str, Any]:
    from mini_k3.latency.kernel_choice import GEMV_MAX_ROWS, triton_available, triton_gemv

    shapes = [(256, 256), (256, 128), (2048, 256), (256, 1024), (3840, 256), (256, 1920), (264, 256)]
    out: dict[str, Any] = {}
    for name, dtype in DTYPES.items():
        g = torch.Generator(device=device).manual_seed(0)
        worst: dict[str, tuple[float, int, tuple[int, int]]] = {}
        for n_out, n_in in shapes:
            w = torch.randn(n_out, n_in, device=device, dtype=dtype, generator=g) / n_in ** 0.5
            row = torch.randn(1, n_in, device=device, dtype=dtype, generator=g)
            for m in range(1, 65):
                x = row.expand(m, n_in).contiguous()
                cases = {"F.linear": lambda: torch.nn.functional.linear(x, w)}
                if triton_available() and m <= GEMV_MAX_ROWS:
                    cases["triton_gemv"] = lambda: triton_gemv(x, w)
                for kname, fn in cases.items():
                    s = spread(fn())
                    if s > worst.get(kname, (-1.0,))[0]:
                        worst[kname] = (s, m, (n_out, n_in))
        # the latent attention's batched products, batch = rows (identical), over long spans too
        for span in (37, 512, 4096):
            for b in (1, 3, 8, 17, 32, 64):
                q = torch.randn(1, 1, 4, 96, device=device, dtype=dtype, generator=g).expand(b, 1, 4, 96)
                keys = torch.randn(1, span, 96, device=device, dtype=dtype, generator=g).expand(b, span, 96).contiguous()
                scores = torch.einsum("bthc,bsc->bhts", q, keys)
                probs = torch.softmax(scores.float(), dim=-1).to(dtype)
                ctx = torch.einsum("bhts,bsc->bthc", probs, keys)
                for kname, t in (("einsum scores", scores), ("einsum context", ctx)):
                    s = spread(t)
                    if s > worst.get(kname, (-1.0,))[0]:
                        worst[kname] = (s, b, (span, 96))
        out[name] = {k: {"spread": v[0], "at_rows": v[1], "shape": v[2]} for k, v in worst.items()}
    return out


# ---- 2. model ---------------------------------------------------------------------------------
def model_configs(device: str) -> dict[str, Any]:
    all_on = LatencyOptions()
    configs: dict[str, Any] = {"stock": None, "candidate (all)": all_on}
    if device == "cuda":
        configs.update({
            "candidate, graphs off": all_on.without("cuda_graphs"),
            "candidate, graph-safe step eager": ("graph_safe", all_on.without("cuda_graphs")),
            "small_batch_kernels off": all_on.without("small_batch_kernels"),
            "small_batch_kernels off, graphs off": all_on.without("small_batch_kernels", "cuda_graphs"),
        })
    configs.update({
        "fused_allreduce off": all_on.without("fused_allreduce"),
        "prefetch on without comm": LatencyOptions(prefetch_without_comm=True),
        "moe routed, graphs off": LatencyOptions(cuda_graphs=False, moe_form="routed"),
        "moe dense, graphs off": LatencyOptions(cuda_graphs=False, moe_form="dense"),
    })
    return configs


@torch.no_grad()
def decode_rows(model, prompt: list[int], batch: int, config: Any, device: str) -> dict[str, Any]:
    cache = model.new_cache(batch, len(prompt) + STEPS + 2)
    logits = model.prefill([prompt] * batch, cache)
    result = {"prefill_logits": spread(logits), "prefill_cache": spread(cache.c_kv.transpose(0, 1))}
    rows = torch.arange(batch, device=device)
    token = logits[0].argmax().expand(batch)
    steps = []
    graph_safe = isinstance(config, tuple)
    eager = LatencyDecoder(model, single_rank(device), config[1]) if graph_safe else None
    for step in range(STEPS):
        pos = torch.full((batch, 1), len(prompt) + step, device=device)
        ids = token[:, None].contiguous()
        if config is None:
            out = model(ids, pos, cache, rows)
        elif graph_safe:
            out = eager.forward(ids, pos, cache, rows, graph_safe=True)
        else:
            out = latency_forward(model, ids, pos, cache, rows, options=config)
        steps.append(spread(out[:, 0]))
        token = out[0, 0].argmax().expand(batch)  # every row gets row 0's token: only arithmetic differs
    result["steps"] = steps
    return result


def model_rows(device: str, dtypes: list[str], only: list[int] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dname in dtypes:
        model, _, tok = load_pretrained(device=device, dtype=DTYPES[dname])
        prompt = tok.encode(PROMPTS[0])
        full = list(range(1, 65))
        subset = [1, 2, 3, 4, 5, 8, 15, 16, 17, 32, 33, 64]
        for cname, config in model_configs(device).items():
            if dname == "fp32" and cname not in ("stock", "candidate (all)", "candidate, graphs off"):
                continue
            batches = full if cname in ("stock", "candidate (all)") and dname == "bf16" else subset
            batches = only or batches
            started = time.perf_counter()
            per_batch = {b: decode_rows(model, prompt, b, config, device) for b in batches}
            bad = {b: max(r["steps"]) for b, r in per_batch.items() if max(r["steps"]) > 0}
            prefill_bad = {b: r["prefill_cache"] for b, r in per_batch.items() if r["prefill_cache"] > 0}
            key = f"{dname} | {cname}"
            out[key] = {"batches": batches, "diverging": bad, "prefill_cache_diverging": prefill_bad,
                        "first_step": {b: r["steps"][0] for b, r in per_batch.items() if r["steps"][0] > 0},
                        "seconds": round(time.perf_counter() - started, 1)}
            print(f"[model] {key:55s} rows differ at {len(bad)}/{len(batches)} batch sizes"
                  + (f": worst {max(bad.values()):.3g} at batch {max(bad, key=bad.get)}" if bad else ""), flush=True)
    return out


# ---- 3. engine: the n>1 probe's sequence, legacy vs fixed graph keying ------------------------
class LegacyGraphedDecoder(graphs_module.GraphedDecoder):
    """The graph cache as it was before the fix: keyed on (shape, c_kv address, shape, dtype).

    Also counts replays whose graph was captured on a k_rope at another address than the
    current cache's (a graph replayed on memory that is no longer its cache)."""

    def __init__(self, decoder, max_graphs: int = graphs_module.MAX_GRAPHS) -> None:
        super().__init__(decoder, max_graphs)
        self._legacy: OrderedDict[tuple, tuple[Any, int, int]] = OrderedDict()  # graph, k_rope address, c_kv id
        self.stale_replays = 0
        self.address_hits = 0

    def __call__(self, ids, positions, cache, cache_rows):
        key = (tuple(ids.shape), cache.c_kv.data_ptr(), tuple(cache.c_kv.shape), cache.c_kv.dtype)
        hit = self._legacy.get(key)
        if hit is None:
            hit = (self._capture(ids, positions, cache, cache_rows), cache.k_rope.data_ptr(), id(cache.c_kv))
            self._legacy[key] = hit
            while len(self._legacy) > self.max_graphs:
                self._legacy.popitem(last=False)
        else:
            self._legacy.move_to_end(key)
            if hit[2] != id(cache.c_kv):
                self.address_hits += 1  # a graph of an earlier cache, found by address
            if hit[1] != cache.k_rope.data_ptr():
                self.stale_replays += 1
        entry = hit[0]
        entry.ids.copy_(ids)
        entry.positions.copy_(positions)
        entry.rows.copy_(cache_rows)
        entry.graph.replay()
        return entry.logits.clone()


def engine_sequence(device: str, dtype: str, mode: str, reps: int) -> dict[str, Any]:
    real = graphs_module.GraphedDecoder
    os.environ.pop("MINIK3_LATENCY_DISABLE", None)
    if mode == "legacy graphs":
        graphs_module.GraphedDecoder = LegacyGraphedDecoder
    if mode == "graphs off":
        os.environ["MINIK3_LATENCY_DISABLE"] = "cuda_graphs"
    try:
        engine = Engine(device=device, dtype=dtype, latency_specialized=mode != "stock")
        cases = []
        for rep in range(reps):
            for i, prompt in enumerate(PROMPTS):
                sampled = GenerationRequest(prompt, max_tokens=16, temperature=1.0, seed=4242 + i, n=4)
                greedy = GenerationRequest(prompt, max_tokens=16, temperature=0.0, n=4, logprobs=5)
                first = [o.text for o in engine.generate([sampled])[0].outputs]
                again = [o.text for o in engine.generate([sampled])[0].outputs]
                rows = [o.text for o in engine.generate([greedy])[0].outputs]
                cases.append({"rep": rep, "prompt": i, "seed_reproduced": first == again,
                              "greedy_distinct": len(set(rows)), "greedy": rows})
        from mini_k3.latency.hook import _DECODERS

        runner = _DECODERS.get(engine.model, (None, None))[1]
        info = {"stale_replays": getattr(runner, "stale_replays", None),
                "address_hits": getattr(runner, "address_hits", None),
                "captures": getattr(runner, "captures", None)}
    finally:
        graphs_module.GraphedDecoder = real
        os.environ.pop("MINIK3_LATENCY_DISABLE", None)
    failing = [c for c in cases if c["greedy_distinct"] > 1 or not c["seed_reproduced"]]
    print(f"[engine] {dtype} {mode:14s} greedy n=4 requests with differing rows: "
          f"{sum(c['greedy_distinct'] > 1 for c in cases)}/{len(cases)}, seed not reproduced: "
          f"{sum(not c['seed_reproduced'] for c in cases)}, {info}", flush=True)
    for c in failing[:3]:
        print(f"    rep {c['rep']} prompt {c['prompt']}: {c['greedy']}", flush=True)
    return {"cases": cases, **info}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtypes", default="bf16,fp32")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--parts", default="kernels,model,engine")
    parser.add_argument("--batches", default="", help="comma-separated batch sizes (default: 1-64 / a subset)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    dtypes = [d for d in args.dtypes.split(",") if d]
    parts = set(args.parts.split(","))
    report: dict[str, Any] = {"torch": torch.__version__,
                              "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu"}
    print(report, flush=True)
    if "kernels" in parts:
        report["kernels"] = kernel_rows(args.device)
        print("[kernels]", json.dumps(report["kernels"]), flush=True)
    if "model" in parts:
        only = [int(b) for b in args.batches.split(",") if b]
        report["model"] = model_rows(args.device, dtypes, only or None)
    if "engine" in parts:
        modes = ["stock", "legacy graphs", "fixed graphs", "graphs off"] if args.device == "cuda" else ["stock", "graphs off"]
        report["engine"] = {f"{d} | {m}": engine_sequence(args.device, d, m, args.reps) for d in dtypes for m in modes}
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
