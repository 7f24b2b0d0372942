"""Clean timed pairs of the vLLM example's ``serve-decode`` benchmark, many more than a check
times (it stops once the rule decides): the example's two servers started as a run starts them
(`fasttrack.targets.sides.open_side`: the manifest's serve args, env and ``cpus``), then
``--pairs`` pairs per concurrency, each one `vllm bench serve` run per side in strict
alternation, with the command line, warm-up, seeds and off-the-timed-core client the check uses
(`vllm_bench.bench_command`, `vllm_pairs.off_the_timed_cpus`). Writes the per-pair ratios of
the manifest metric (stock / candidate: above 1, the candidate is faster; `--also FIELD` keeps
another result field's ratios from the same runs) as JSON for
``benchmarks/false_alarms.py --only speed`` (power of the rule on this host, by resampling).

    python benchmarks/record_vllm_pairs.py [--pairs 40] [--concurrency C] [--out benchmarks/results/vllm-serve-decode-pairs-pinned.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "examples" / "vllm-mini-k3" / "fasttrack.yaml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--concurrency", type=int, action="append", help="only these concurrencies (default: all)")
    ap.add_argument(
        "--also",
        action="append",
        default=[],
        help="more result fields whose pair ratios to keep from the same runs (e.g. median_itl_ms)",
    )
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "vllm-serve-decode-pairs-pinned.json")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from fasttrack.kinds.benchmarks.vllm_bench import bench_command, prompts_at, side_cpus
    from fasttrack.kinds.benchmarks.vllm_pairs import off_the_timed_cpus
    from fasttrack.manifest import load_manifest
    from fasttrack.manifest.sections import thaw
    from fasttrack.targets.sides import open_side
    from fasttrack.targets.vllm.bench import InProcessBench

    manifest = load_manifest(MANIFEST)
    bench = next(b for b in manifest.benchmarks if b.workload.get("kind") == "vllm_bench")
    workload = thaw(bench.workload)  # plain lists and dicts, as the check gets it
    vllm = manifest.target.vllm
    assert vllm is not None, "the example's target is vllm"
    point = {"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1}
    runner = InProcessBench()
    ratios: dict[str, list[float]] = {}
    also: dict[str, dict[str, list[float]]] = {}  # field -> concurrency -> ratios of the same runs
    with tempfile.TemporaryDirectory(prefix="fasttrack-pairs-") as tmp:
        folder = Path(tmp)
        sides = {side: open_side(manifest, side, point, log_dir=folder) for side in ("baseline", "candidate")}
        try:
            tokenizer = ["--tokenizer", str(manifest.resolve_path(vllm.model))]
            for concurrency in [int(c) for c in workload["max_concurrency"]]:
                if args.concurrency and concurrency not in args.concurrency:
                    continue
                num = prompts_at(workload, concurrency)

                def run(side: str, index: int, concurrency: int = concurrency, num: int = num) -> dict[str, float]:
                    name = f"{side}-c{concurrency}-{index}.json"
                    command = bench_command(
                        {**workload, "num_prompts": num},
                        str(sides[side].url),
                        vllm.served_model_name or "",
                        concurrency,
                        folder,
                        name,
                        1000 + index if index >= 0 else 999,
                        program=(),
                    )
                    with off_the_timed_cpus(side_cpus(manifest, side)):
                        code, tail = runner.run(command + tokenizer, folder / f"{name}.log")
                    if code != 0:
                        raise SystemExit(f"vllm bench serve failed ({side}, concurrency {concurrency}): {tail}")
                    result = json.loads((folder / name).read_text())
                    return {field: float(result[field]) for field in (bench.metric, *args.also)}

                run("baseline", -1), run("candidate", -1)  # the untimed warm-up pair, as the check
                found = []
                started = time.monotonic()
                for index in range(args.pairs):
                    stock, candidate = run("baseline", index), run("candidate", index)
                    found.append(round(stock[bench.metric] / candidate[bench.metric], 4))
                    for field in args.also:
                        also.setdefault(field, {}).setdefault(str(concurrency), []).append(
                            round(stock[field] / candidate[field], 4)
                        )
                ratios[str(concurrency)] = found
                print(
                    f"concurrency {concurrency}: {len(found)} pairs in {time.monotonic() - started:.0f} s, "
                    f"median {statistics.median(found):.3f}, min {min(found):.3f}, max {max(found):.3f}, "
                    f"below 0.95: {sum(r < 0.95 for r in found)}",
                    flush=True,
                )
        finally:
            for handle in sides.values():
                handle.close()
    record = {
        "what": (
            "clean pair ratios (stock median TPOT / candidate median TPOT) of examples/vllm-mini-k3's "
            "serve-decode benchmark on the 2-core host, each server pinned to its own core (cpus) and "
            "vllm bench serve run off the timed server's core, strict alternation, the check's own "
            f"command lines; {args.pairs} pairs per concurrency after one warm-up pair "
            "(benchmarks/record_vllm_pairs.py)"
        ),
        "recorded": time.strftime("%Y-%m-%d"),
        "metric": bench.metric,
        "pair_ratios": ratios,
    }
    if also:
        record["pair_ratios_of"] = also
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
