"""Per-layer decode time and kernel count of mini-K3's stock vs latency-specialised decode path.

For each batch size, in ONE run (so every ratio compares like with like):

  per-layer us     time of the decoder layers of one decode step (1 token per row, a cache
                   holding ``--context`` tokens per row) divided by the number of layers; median
                   of ``--repeats`` timings of ``--steps`` back-to-back steps each, the paths
                   taking turns within every repeat
  kernels/layer    CUDA: GPU kernels (memcpy/memset listed apart) launched by the layers of one
                   step, from torch.profiler, divided by the number of layers; CPU: top-level
                   ATen operators instead (there are no kernels)
  decode tok/s     batch / time of one whole decode step (embedding, layers, head), i.e. the
                   model's decode rate without the engine's sampling and bookkeeping
  per user tok/s   1 / step time

Paths: ``stock`` is the model's own forward (eager, as it runs in the engine). ``candidate`` is
the latency path as the engine runs it (CUDA graphs on GPU). On GPU ``candidate-eager`` (no
graphs) is added, so the graphs' share of the gain is visible. The kernel count of a graphed step
is counted on its eager run: a graph replays exactly the kernels it captured. Tensor-parallel
size 1 (one process). Random-init weights of the shipped shape unless ``--weights`` (the cost per
token does not depend on the values, except through routing, which random weights spread evenly).

    python benchmarks/latency_path.py --device cpu --batches 1,8,64 --json cpu.json
    python benchmarks/latency_path.py --device cuda --dtype bf16 --json h200.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

try:
    import mini_k3  # noqa: F401
except ImportError:  # a fresh clone without the example installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "mini-k3"))

from mini_k3.config import MiniK3Config
from mini_k3.latency import LatencyDecoder as ShardedDecoder  # the latency path's decoder for one rank
from mini_k3.latency import LatencyOptions, decoder_for
from mini_k3.model import MiniK3, load_pretrained, rope_cos_sin
from mini_k3.parallel import safe_environment, single_rank

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_interleaved(
    fns: dict[str, Callable[[], object]], device: torch.device, steps: int, repeats: int
) -> dict[str, float]:
    """Median seconds per call of each fn; the fns take turns within every repeat, so a change in
    the machine's load (a shared host) hits all of them alike instead of skewing the ratios."""
    for fn in fns.values():
        for _ in range(3):
            fn()
    synchronize(device)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            if device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(steps):
                    fn()
                end.record()
                end.synchronize()
                samples[name].append(start.elapsed_time(end) / 1e3 / steps)
            else:
                t0 = time.perf_counter()
                for _ in range(steps):
                    fn()
                samples[name].append((time.perf_counter() - t0) / steps)
    return {name: statistics.median(values) for name, values in samples.items()}


def count_ops(fn: Callable[[], object], device: torch.device) -> dict[str, int]:
    """Kernels (CUDA) or top-level ATen operators (CPU) of one call of ``fn``."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    fn()
    synchronize(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        fn()
        synchronize(device)
    events = prof.events()
    if device.type == "cuda":
        gpu = [e for e in events if e.device_type == DeviceType.CUDA]
        copies = [e for e in gpu if e.name.lower().startswith(("memcpy", "memset"))]
        return {"kernels": len(gpu) - len(copies), "memcpy_memset": len(copies)}
    top = [e for e in events if e.name.startswith("aten::") and e.cpu_parent is None]
    return {"aten_ops": len(top)}


def graphed(fn: Callable[[], object], device: torch.device) -> Callable[[], object]:
    """``fn`` captured in a CUDA graph; returns its replay."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def build_model(args: argparse.Namespace, device: torch.device) -> MiniK3:
    dtype = DTYPES[args.dtype]
    if args.weights:
        model, _config, _tok = load_pretrained(args.weights, device=device, dtype=dtype)
        return model
    torch.manual_seed(0)
    return MiniK3(MiniK3Config()).to(device=device, dtype=dtype).eval()


@torch.no_grad()
def measure_batch(model: MiniK3, batch: int, args: argparse.Namespace, device: torch.device) -> dict:
    c = model.config
    n_layers = c.n_layers
    cache = model.new_cache(batch, args.context + 1)
    g = torch.Generator().manual_seed(batch)
    prompts = torch.randint(0, 256, (batch, args.context), generator=g).tolist()
    model.prefill(prompts, cache)
    ids = torch.randint(0, 256, (batch, 1), generator=g).to(device)
    positions = torch.full((batch, 1), args.context, dtype=torch.long, device=device)
    rows = torch.arange(batch, device=device)
    x0 = model.embed(ids)

    def stock_layers() -> torch.Tensor:
        cos, sin = rope_cos_sin(positions, c.qk_rope_head_dim, c.rope_theta)
        x = x0
        for i, layer in enumerate(model.layers):
            x = layer(x, positions, cos, sin, (cache.c_kv[i], cache.k_rope[i]), rows, False)
        return x

    def stock_step() -> torch.Tensor:
        return model(ids, positions, cache, rows)

    on_gpu = device.type == "cuda"
    decoder = ShardedDecoder(model, single_rank(device), LatencyOptions(cuda_graphs=on_gpu))

    def candidate_layers() -> torch.Tensor:
        return decoder.forward_layers(x0, positions, cache, rows, graph_safe=on_gpu)

    runner = decoder_for(model, LatencyOptions(cuda_graphs=on_gpu))

    def candidate_step() -> torch.Tensor:
        return (
            runner(ids, positions, cache, rows)
            if not isinstance(runner, ShardedDecoder)
            else runner.forward(ids, positions, cache, rows)
        )

    variants: dict[str, tuple[Callable, Callable, Callable]] = {
        # name: (layers fn for timing, layers fn for counting, whole step fn)
        "stock": (stock_layers, stock_layers, stock_step),
    }
    if on_gpu:
        variants["candidate"] = (graphed(candidate_layers, device), candidate_layers, candidate_step)
        variants["candidate-eager"] = (
            candidate_layers,
            candidate_layers,
            lambda: decoder.forward(ids, positions, cache, rows, graph_safe=True),
        )
        # ablation: technique 1 off (cuBLAS GEMM at every size), graphs kept
        large = ShardedDecoder(model, single_rank(device), LatencyOptions(small_batch_kernels=False))

        def large_layers() -> torch.Tensor:
            return large.forward_layers(x0, positions, cache, rows, graph_safe=True)

        large_step = graphed(lambda: large.forward(ids, positions, cache, rows, graph_safe=True), device)
        variants["candidate-no-small-batch-kernels"] = (graphed(large_layers, device), large_layers, large_step)
    else:
        variants["candidate"] = (candidate_layers, candidate_layers, candidate_step)
    layer_times = time_interleaved({n: v[0] for n, v in variants.items()}, device, args.steps, args.repeats)
    step_times = time_interleaved({n: v[2] for n, v in variants.items()}, device, args.steps, args.repeats)
    out: dict[str, dict] = {}
    for name, (_timed, counted_layers, _step) in variants.items():
        layers_s, step_s = layer_times[name], step_times[name]
        counts = {k: v / n_layers for k, v in count_ops(counted_layers, device).items()}
        out[name] = {
            "per_layer_us": layers_s / n_layers * 1e6,
            "ops_per_layer": counts,
            "step_ms": step_s * 1e3,
            "decode_tokens_per_s": batch / step_s,
            "per_user_tokens_per_s": 1.0 / step_s,
        }
    key = "kernels" if on_gpu else "aten_ops"
    stock = out["stock"]
    ratios = {}
    for name in out:
        if name == "stock":
            continue
        ratios[name] = {
            "per_layer_time": out[name]["per_layer_us"] / stock["per_layer_us"],
            "ops_per_layer": out[name]["ops_per_layer"][key] / stock["ops_per_layer"][key],
            "decode_tokens_per_s": out[name]["decode_tokens_per_s"] / stock["decode_tokens_per_s"],
        }
    return {"batch": batch, "paths": out, "ratios_vs_stock": ratios}


def environment(device: torch.device) -> dict:
    info = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": str(device),
        "threads": torch.get_num_threads(),
        "host": platform.machine(),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        try:
            import triton

            info["triton"] = triton.__version__
        except ImportError:
            info["triton"] = None
    else:
        info["cpu"] = platform.processor() or platform.machine()
    return info


def print_table(report: dict) -> None:
    key = "kernels" if report["environment"]["device"].startswith("cuda") else "aten_ops"
    print(f"\nmini-K3 decode, {report['environment']['device']}, {report['dtype']}, TP 1, context {report['context']}")
    print(
        f"{'batch':>5} {'path':<34} {'us/layer':>10} {key + '/layer':>15} {'step ms':>9} {'tok/s':>10} "
        f"{'x time':>7} {'x ops':>6} {'x tok/s':>8}"
    )
    for row in report["results"]:
        for name, m in row["paths"].items():
            r = row["ratios_vs_stock"].get(name)
            ratio = f"{r['per_layer_time']:7.2f} {r['ops_per_layer']:6.2f} {r['decode_tokens_per_s']:8.2f}" if r else ""
            print(
                f"{row['batch']:>5} {name:<34} {m['per_layer_us']:10.1f} {m['ops_per_layer'][key]:15.1f} "
                f"{m['step_ms']:9.3f} {m['decode_tokens_per_s']:10.1f} {ratio}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default=None, help="default: bf16 on CUDA, fp32 on CPU")
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--context", type=int, default=256, help="tokens already in each row's cache")
    parser.add_argument("--steps", type=int, default=None, help="calls per timing (default 50 GPU, 10 CPU)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--weights", default=None, help="a weights folder (default: random init, shipped shape)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU intra-op threads (default 1: on a small shared host, a second OpenMP thread "
        "that gets descheduled stalls every operator and swamps the differences measured)",
    )
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    safe_environment()
    device = torch.device(args.device)
    args.dtype = args.dtype or ("bf16" if device.type == "cuda" else "fp32")
    args.steps = args.steps or (50 if device.type == "cuda" else 10)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    model = build_model(args, device)
    report = {
        "benchmark": "latency_path",
        "dtype": args.dtype,
        "context": args.context,
        "tensor_parallel": 1,
        "weights": args.weights or "random-init (shipped shape)",
        "config": model.config.to_dict(),
        "environment": environment(device),
        "results": [],
    }
    for batch in (int(b) for b in args.batches.split(",")):
        report["results"].append(measure_batch(model, batch, args, device))
        print_table({**report, "results": report["results"][-1:]})
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
