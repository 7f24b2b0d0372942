"""What the token-coverage probe costs per 100,000 vocabulary ids, measured on the example.

The probe feeds every id once: rows of ``length`` tokens (a fixed first token, then length - 1
ids), ``batch`` rows per call, scored on stock by one prefill pass and on the candidate by one
prefill pass and by length - 1 decode steps of the whole batch. One call of each kind on full
batches is timed (fastest of ``--repeats``) on the example's model (TP 1, fp32, one thread) and
scaled to 100,000 ids: 100,000 / (batch x (length - 1)) calls of each. The example's vocabulary
has 264 ids; the whole probe on it is timed too.

    python benchmarks/token_coverage_cost.py [--batch 64] [--length 32] [--repeats 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "examples" / "mini-k3")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    from fasttrack.probes.adapters import InProcessProbeTarget
    from fasttrack.probes.token_coverage import TokenCoverageSettings, probe_token_coverage
    from mini_k3.fasttrack_target import create

    base = InProcessProbeTarget(create(device=args.device), name="baseline", max_context=4096, through_decode=False)
    cand = InProcessProbeTarget(
        create(device=args.device, latency_specialized=True), name="candidate", max_context=4096
    )
    vocab = base.target.engine.vocab_size
    rows = [[(r * (args.length - 1) + t) % vocab for t in range(args.length)] for r in range(args.batch)]
    timed = {}
    for label, side, through in (
        ("stock prefill", base, False),
        ("candidate prefill", cand, False),
        ("candidate decode", cand, True),
    ):
        best = float("inf")
        for _ in range(args.repeats):
            started = time.perf_counter()
            side.next_token_logprobs_batch(rows, through_decode=through)
            best = min(best, time.perf_counter() - started)
        timed[label] = best
    ids = args.batch * (args.length - 1)
    per_100k = sum(timed.values()) * 100_000 / ids
    print(f"one call, {args.batch} rows x {args.length} tokens ({ids} ids), {args.device}, fastest of {args.repeats}:")
    for label, seconds in timed.items():
        print(f"  {label:<18} {seconds:7.3f} s   -> {seconds * 100_000 / ids:7.1f} s per 100k ids")
    print(f"token coverage per 100,000 ids: {per_100k:.1f} s ({per_100k * 1.6:.1f} s for a 160k vocabulary)")
    started = time.perf_counter()
    result = probe_token_coverage(base, cand, TokenCoverageSettings(batch=args.batch, length=args.length))
    print(f"the whole probe on the example's {vocab} ids: {time.perf_counter() - started:.2f} s, {result.status}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
