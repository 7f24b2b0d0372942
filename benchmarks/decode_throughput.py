"""Decode throughput of the mini-K3 example engine at several batch sizes.

For each device and batch size: B prompts of ``--input-tokens`` random printable bytes, greedy
decoding of ``--output-tokens`` tokens each (end-of-sequence ignored, so every run decodes the
same number of steps), median of ``--repeats`` runs after one warm-up. Reported per point:

  decode tok/s     tokens from decode steps / wall time of the generate call minus its prefill
                   (the engine's own bookkeeping, sampling and cache handling included)
  per user         decode tok/s divided by the batch size
  model tok/s      the same tokens / time inside the decode forward passes only

With ``--latency-specialized`` the candidate path runs in alternation with the stock path (run by
run) and the candidate/stock ratio of median decode tok/s is printed; a model without that path says so and the
benchmark measures the stock path only.

    python benchmarks/decode_throughput.py                    # CPU, plus CUDA when present
    python benchmarks/decode_throughput.py --device cuda --batches 1,8,64 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

try:
    import mini_k3  # noqa: F401
except ImportError:  # running from a fresh clone without installing the example
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "mini-k3"))

from mini_k3.config import MiniK3Config
from mini_k3.engine import Engine, GenerationRequest
from mini_k3.model import WEIGHTS_DIR, MiniK3
from mini_k3.tokenizer import ByteTokenizer


@dataclass(frozen=True)
class Measurement:
    device: str
    path: str
    batch: int
    decode_tokens_per_s: float
    per_user_tokens_per_s: float
    model_tokens_per_s: float
    prefill_s: float


def weights_folder(args: argparse.Namespace) -> str | None:
    """The weights to load, or None for random weights of the default shape (same cost per token)."""
    if args.random_init:
        return None
    return args.model or (str(WEIGHTS_DIR) if (WEIGHTS_DIR / "model.safetensors").exists() else None)


def build_engine(args: argparse.Namespace, device: str, latency_specialized: bool) -> Engine:
    options = {
        "device": device,
        "dtype": args.dtype,
        "latency_specialized": latency_specialized,
        "max_model_len": args.input_tokens + args.output_tokens + 8,
        "seed": 0,
    }
    weights = weights_folder(args)
    if weights is not None:
        return Engine(model_path=weights, **options)
    torch.manual_seed(0)
    return Engine(model=MiniK3(MiniK3Config()), tokenizer=ByteTokenizer(), **options)


def prompts(batch: int, length: int) -> list[list[int]]:
    generator = torch.Generator().manual_seed(batch)
    return [torch.randint(32, 127, (length,), generator=generator).tolist() for _ in range(batch)]


def run_once(engine: Engine, batch: int, args: argparse.Namespace) -> tuple[float, float, float]:
    """(decode tok/s, model-only decode tok/s, prefill seconds) of one batched generate call."""
    requests = [
        GenerationRequest(p, max_tokens=args.output_tokens, temperature=0.0, ignore_eos=True)
        for p in prompts(batch, args.input_tokens)
    ]
    before = engine.stats_snapshot()
    started = time.perf_counter()
    engine.generate(requests)
    wall = time.perf_counter() - started
    after = engine.stats_snapshot()
    prefill = after.prefill_seconds - before.prefill_seconds
    model_decode = after.decode_seconds - before.decode_seconds
    tokens = batch * (args.output_tokens - 1)  # the first token of each sequence comes from the prefill
    return tokens / (wall - prefill), tokens / model_decode, prefill


def measure_point(
    engines: dict[str, Engine], device: str, batch: int, args: argparse.Namespace
) -> dict[str, Measurement]:
    """Median of ``--repeats`` runs per path; the paths alternate run by run, so a machine that
    slows down or speeds up during the benchmark affects both alike."""
    runs: dict[str, list[tuple[float, float, float]]] = {path: [] for path in engines}
    for _ in range(args.repeats):
        for path, engine in engines.items():
            runs[path].append(run_once(engine, batch, args))
    out = {}
    for path, samples in runs.items():
        decode = statistics.median(r[0] for r in samples)
        out[path] = Measurement(
            device=device,
            path=path,
            batch=batch,
            decode_tokens_per_s=decode,
            per_user_tokens_per_s=decode / batch,
            model_tokens_per_s=statistics.median(r[1] for r in samples),
            prefill_s=statistics.median(r[2] for r in samples),
        )
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: CPU, and CUDA as well when it is available",
    )
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--input-tokens", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", default="fp32", choices=("fp32", "bf16", "fp16"))
    parser.add_argument("--model", default=None, help="weights folder (default: the shipped weights)")
    parser.add_argument("--random-init", action="store_true", help="random weights of the default shape")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--latency-specialized", action="store_true", help="also run the candidate path")
    parser.add_argument("--json", default=None, help="write the measurements here as JSON")
    return parser.parse_args(argv)


def _shown(weights: object) -> str:
    """A weights folder relative to the repository (printed figures get pasted into docs)."""
    root = Path(__file__).resolve().parents[1]
    try:
        return str(Path(str(weights)).resolve().relative_to(root))
    except ValueError:
        return str(weights)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    devices = (
        ["cpu", "cuda"]
        if args.device == "auto" and torch.cuda.is_available()
        else (["cpu"] if args.device == "auto" else [args.device])
    )
    batches = [int(b) for b in args.batches.split(",")]
    results: list[Measurement] = []
    notes: list[str] = []
    print(
        f"mini-K3 decode throughput: {args.input_tokens} prompt + {args.output_tokens} generated tokens, "
        f"greedy, {args.dtype}, median of {args.repeats}; torch {torch.__version__}, "
        f"{torch.get_num_threads()} CPU threads"
    )
    for device in devices:
        stock = build_engine(args, device, latency_specialized=False)
        weights = weights_folder(args) or "random weights, default config"
        candidate = None
        if args.latency_specialized:
            try:
                candidate = build_engine(args, device, latency_specialized=True)
            except ValueError as exc:
                notes.append(f"{device}: no candidate measured ({exc}); stock only")
        name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
        print(f"\n{device} ({name}; {_shown(weights)})")
        print(f"{'path':<20} {'batch':>5} {'decode tok/s':>13} {'per user':>9} {'model tok/s':>12} {'prefill s':>10}")
        for batch in batches:
            engines = {"stock": stock, **({"latency_specialized": candidate} if candidate else {})}
            for engine in engines.values():  # warm-up (allocator, kernels, lazy init, graphs)
                run_once(engine, batch, argparse.Namespace(**{**vars(args), "output_tokens": 4}))
            point = measure_point(engines, device, batch, args)
            for m in point.values():
                results.append(m)
                print(
                    f"{m.path:<20} {m.batch:>5} {m.decode_tokens_per_s:>13.1f} {m.per_user_tokens_per_s:>9.1f} "
                    f"{m.model_tokens_per_s:>12.1f} {m.prefill_s:>10.3f}"
                )
            if "latency_specialized" in point:
                ratio = point["latency_specialized"].decode_tokens_per_s / point["stock"].decode_tokens_per_s
                print(f"{'candidate / stock':<20} {batch:>5} {ratio:>13.3f}x")
    for note in notes:
        print(f"note: {note}")
    if args.json:
        Path(args.json).write_text(json.dumps({"measurements": [asdict(m) for m in results], "notes": notes}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
