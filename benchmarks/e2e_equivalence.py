"""End-to-end equivalence of mini-K3's latency_specialized path with its stock path, across TP.

For each tensor-parallel size: a stock engine and a candidate (``latency_specialized``) engine
decode every row of the evaluation sets greedily with top-N logprobs, in the same length-sorted
batches; each candidate output is compared with the stock output at the same TP by vLLM's
``check_logprobs_close`` rule (`mini_k3.equivalence.logprobs_close`). With TP 1 in the run, the
stock outputs at TP > 1 are also compared with stock at TP 1 (what tensor parallelism alone
changes). Prints, per set and TP, the counts of identical outputs, outputs within the rule and
violations (with the first few violations spelled out), and the wall time of each engine.

    python benchmarks/e2e_equivalence.py                          # all sets, TP 1, 2 and 4
    python benchmarks/e2e_equivalence.py --tp 1 --limit 20 --json out.json

Exit status: 0 when no comparison is a violation, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

try:
    import mini_k3  # noqa: F401
except ImportError:  # running from a fresh clone without installing the example
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "mini-k3"))

from mini_k3.engine import Engine, GenerationRequest
from mini_k3.equivalence import (
    EVAL_SETS,
    IDENTICAL,
    VIOLATION,
    WITHIN_RULE,
    eval_prompts,
    length_batches,
    logprobs_close,
)


def generate_all(
    engine: Engine, prompts: list[list[int]], max_tokens: int, top_n: int, batch_tokens: int
) -> tuple[list, float]:
    outputs: list = [None] * len(prompts)
    started = time.perf_counter()
    for batch in length_batches(prompts, max_tokens, batch_tokens):
        requests = [
            GenerationRequest(prompt=prompts[i], max_tokens=max_tokens, temperature=0.0, logprobs=top_n) for i in batch
        ]
        for index, result in zip(batch, engine.generate(requests)):
            outputs[index] = result.outputs[0]
    return outputs, time.perf_counter() - started


def compare(reference: list, candidate: list, top_n: int) -> dict:
    counts = {IDENTICAL: 0, WITHIN_RULE: 0, VIOLATION: 0}
    examples = []
    for row, (ref, cand) in enumerate(zip(reference, candidate)):
        result = logprobs_close(ref, cand, top_n)
        counts[result.verdict] += 1
        if result.verdict == VIOLATION and len(examples) < 5:
            examples.append(f"row {row}: {result.detail}")
    return {**counts, "rows": len(reference), "violations_detail": examples}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default=",".join(EVAL_SETS), help="comma-separated: " + ",".join(EVAL_SETS))
    parser.add_argument("--tp", default="1,2,4", help="comma-separated tensor-parallel sizes")
    parser.add_argument("--limit", type=int, default=None, help="first N rows of each set (default: all)")
    parser.add_argument("--max-tokens", type=int, default=None, help="override every set's generation length")
    parser.add_argument("--top-n", type=int, default=5)
    parser.add_argument("--batch-tokens", type=int, default=32768, help="cache slots (prompt + generation) per batch")
    parser.add_argument("--speculative-draft-tokens", type=int, default=0)
    parser.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"))
    parser.add_argument("--model", default=None, help="weights folder (default: the shipped weights)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads of this process (1: fastest for this small model on a shared host)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    sets = [s for s in args.sets.split(",") if s]
    unknown = sorted(set(sets) - set(EVAL_SETS))
    if unknown:
        parser.error(f"unknown sets {unknown}; known: {sorted(EVAL_SETS)}")
    tps = [int(t) for t in args.tp.split(",") if t]

    report: dict = {"settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, "results": []}
    stock_tp1: dict[str, list] = {}
    violations = 0
    for tp in tps:
        engines = {}
        for side, switch in (("stock", False), ("candidate", True)):
            engines[side] = Engine(
                model_path=args.model,
                dtype=args.dtype,
                latency_specialized=switch,
                tensor_parallel_size=tp,
                speculative_draft_tokens=args.speculative_draft_tokens,
            )
        try:
            for name in sets:
                spec = EVAL_SETS[name]
                prompts = eval_prompts(engines["stock"].tokenizer, name, args.limit)
                max_tokens = args.max_tokens or spec.max_tokens
                outputs, seconds = {}, {}
                for side, engine in engines.items():
                    outputs[side], seconds[side] = generate_all(
                        engine, prompts, max_tokens, args.top_n, args.batch_tokens
                    )
                row = {
                    "set": name,
                    "tp": tp,
                    "max_tokens": max_tokens,
                    "seconds": {k: round(v, 1) for k, v in seconds.items()},
                    "candidate_vs_stock": compare(outputs["stock"], outputs["candidate"], args.top_n),
                }
                if tp == 1:
                    stock_tp1[name] = outputs["stock"]
                elif name in stock_tp1:
                    row["stock_vs_stock_tp1"] = compare(stock_tp1[name], outputs["stock"], args.top_n)
                violations += row["candidate_vs_stock"][VIOLATION]
                report["results"].append(row)
                print_row(row)
            steps = {side: e.stats_snapshot().decode_steps_by_path for side, e in engines.items()}
            report.setdefault("decode_steps_by_path", {})[f"tp{tp}"] = steps
            print(f"  tp{tp} decode steps by path: {steps}", flush=True)
        finally:
            for engine in engines.values():
                engine.close()
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if violations else 0


def print_row(row: dict) -> None:
    def fmt(c: dict) -> str:
        return f"{c[IDENTICAL]:4d} identical {c[WITHIN_RULE]:3d} within-rule {c[VIOLATION]:3d} violations / {c['rows']}"

    line = (
        f"{row['set']:7s} tp{row['tp']}  candidate vs stock: {fmt(row['candidate_vs_stock'])}"
        f"   (stock {row['seconds']['stock']:.1f}s, candidate {row['seconds']['candidate']:.1f}s)"
    )
    print(line, flush=True)
    if "stock_vs_stock_tp1" in row:
        print(f"{'':7s} tp{row['tp']}  stock vs stock tp1: {fmt(row['stock_vs_stock_tp1'])}", flush=True)
    for detail in row["candidate_vs_stock"]["violations_detail"]:
        print(f"{'':9s}violation {detail}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
