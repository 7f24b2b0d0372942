"""lm-eval's own ``local-completions`` model against running servers, timed: items/s and scores.

    python examples/vllm-mini-k3/scripts/lm_eval_run.py URL [URL ...] --task mrcr --concurrency 64

Runs ``lm_eval run --model local-completions`` (one process per URL, all at once) on the
gate's MRCR or AIME25 task with prompts rendered by mini-k3's chat template
(examples/vllm-mini-k3/evals), greedy, the gate's max_tokens (MRCR 96, AIME 512). MRCR takes the
first ``--per-bin`` rows of each of its three length bins (the file holds 80 per bin, in bin
order), AIME the first ``--per-bin`` rows. Prints per URL: items, wall seconds of the whole
lm_eval process, items/s, the task's score and the responses' digest (equal digests: equal
outputs). Run from the repository root.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TASKS = {"mrcr": ("mrcr_rendered", "grade,all_samples"), "aime25": ("aime25_rendered", "exact_match,all_samples")}


def indices(task: str, per_bin: int) -> list[int]:
    if task == "mrcr":
        return [b * 80 + i for b in range(3) for i in range(per_bin)]
    return list(range(per_bin))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("urls", nargs="+")
    ap.add_argument("--task", choices=list(TASKS), required=True)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--per-bin", type=int, default=72)
    args = ap.parse_args(argv)
    name, metric = TASKS[args.task]
    samples = json.dumps({name: indices(args.task, args.per_bin)})
    out = Path(tempfile.mkdtemp(prefix="lm_eval_run_"))
    procs = {}
    load = Path("/proc/loadavg").read_text().split()[:3]
    t0 = time.perf_counter()
    for i, url in enumerate(args.urls):
        cmd = [sys.executable, "-m", "lm_eval", "run", "--model", "local-completions", "--model_args",
               f"base_url={url.rstrip('/')}/v1/completions", "model=mini-k3", f"num_concurrent={args.concurrency}",
               "tokenizer_backend=None", "tokenized_requests=False", "max_retries=3",
               "--include_path", "examples/vllm-mini-k3/evals", "--tasks", name, "--samples", samples,
               "--log_samples", "--output_path", str(out / str(i))]
        procs[url] = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=(out / f"{i}.log").open("wb"))
    report: dict[str, object] = {"task": name, "concurrency": args.concurrency, "load": load}
    for i, (url, proc) in enumerate(procs.items()):
        if proc.wait() != 0:
            raise SystemExit(f"lm_eval against {url} failed: see {out / f'{i}.log'}")
        seconds = time.perf_counter() - t0
        results = json.loads(next((out / str(i)).rglob("results_*.json")).read_text())["results"][name]
        lines = next((out / str(i)).rglob(f"samples_{name}_*.jsonl")).read_text().splitlines()
        responses = sorted((json.loads(x)["doc_id"], json.loads(x)["resps"]) for x in lines)
        n = len(responses)
        report[url] = {"items": n, "seconds": round(seconds, 1), "items_per_s": round(n / seconds, 2),
                       "score": round(results[metric], 4),
                       "responses_sha256": hashlib.sha256(json.dumps(responses).encode()).hexdigest()[:16]}
    report["load_after"] = Path("/proc/loadavg").read_text().split()[:3]
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
