"""Wall time of `fasttrack --help` and `fasttrack validate` on a generated 1,000-line manifest.

Targets: --help < 0.3 s, validate < 0.5 s (median of several runs, each a fresh process).

    python benchmarks/cli_speed.py [--runs 7] [--lines 1000]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "examples/mini-k3/fasttrack.yaml"

EVAL = """  - id: eval-{i}
    task: aime25
    metric: exact_match
    margin: 0.05
    alpha: 0.05
    repeats: 2
    generation: {{temperature: 0.0, max_tokens: 128, seed: {i}}}
"""
BENCH = """  - id: bench-{i}
    metric: decode_tokens_per_s_per_user
    points: {{batch: [1, 8]}}
    setups:
      baseline: {{switch: false, gpus: 1}}
      candidate: {{switch: true, gpus: 1}}
    claims:
      - id: claim-{i}
        statement: "claim {i}"
        baseline: {{value: 100}}
        candidate: {{value: 150}}
        speedup: 1.5
"""


def generate_manifest(lines: int) -> str:
    """The mini-k3 manifest with extra evals and benchmarks appended until it has ``lines`` lines."""
    text = BASE.read_text()
    head, _, _ = text.partition("\nevals:\n")
    evals, benches, i = [], [], 0
    while (head.count("\n") + sum(e.count("\n") for e in evals + benches) + 2) < lines:
        (evals if i % 2 == 0 else benches).append((EVAL if i % 2 == 0 else BENCH).format(i=i))
        i += 1
    out = head + "\nevals:\n" + "".join(evals) + "benchmarks:\n" + "".join(benches)
    return out


def median_seconds(command: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
        times.append(time.perf_counter() - start)
        if done.returncode not in (0,):
            raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--lines", type=int, default=1000)
    args = parser.parse_args()
    exe = shutil.which("fasttrack")
    cli = [exe] if exe else [sys.executable, "-m", "fasttrack"]
    with tempfile.TemporaryDirectory() as folder:
        manifest = Path(folder) / "fasttrack.yaml"
        manifest.write_text(generate_manifest(args.lines))
        n_lines = manifest.read_text().count("\n")
        help_s = median_seconds([*cli, "--help"], args.runs)
        validate_s = median_seconds([*cli, "validate", str(manifest)], args.runs)
    print(f"command: {' '.join(Path(c).name for c in cli)}; median of {args.runs} runs")
    print(f"fasttrack --help:                {help_s:.3f} s  (target < 0.3 s) {'ok' if help_s < 0.3 else 'SLOW'}")
    print(
        f"fasttrack validate ({n_lines} lines): {validate_s:.3f} s  (target < 0.5 s) {'ok' if validate_s < 0.5 else 'SLOW'}"
    )
    return 0 if help_s < 0.3 and validate_s < 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
