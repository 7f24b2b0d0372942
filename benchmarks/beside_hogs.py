"""Run a command beside N CPU-bound processes, the way a shared CI host loads it.

Each hog is a busy Python loop in its own process; they start before the command and are killed
when it ends (or after ``--max-s``, which also bounds the command). Prints the command's exit
code, its wall time and the 1-minute load average sampled every 5 s during it (mean and max), so
a result can be quoted with the load it met.

    python benchmarks/beside_hogs.py --hogs 2 -- .venv/bin/python -m pytest -q tests

The suite's robustness target (#19): it passes twice in a fresh clone beside two hogs. The main
job's: ``python benchmarks/beside_hogs.py --hogs 2 -- python benchmarks/main_job.py``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from main_job import LoadSampler  # a sibling script: run this one as a script, as main_job.py is

HOG_CODE = "while True:\n    pass\n"


def start_hogs(count: int) -> list[subprocess.Popen[bytes]]:
    # Hogs hold none of the caller's pipes open (a reader would wait on them for its EOF).
    quiet = subprocess.DEVNULL
    return [subprocess.Popen([sys.executable, "-c", HOG_CODE], stdout=quiet, stderr=quiet) for _ in range(count)]


def stop(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
    for process in processes:
        process.wait()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hogs", type=int, default=2, help="CPU-bound processes beside the command")
    parser.add_argument("--max-s", type=float, default=3600.0, help="stop the command after this long")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command (after --)")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")

    hogs = start_hogs(args.hogs)
    started = time.monotonic()
    try:
        with LoadSampler() as sampler:
            child = subprocess.Popen(command, start_new_session=True)
            try:
                rc = child.wait(timeout=args.max_s)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                rc = child.wait()
                print(f"beside_hogs: stopped after {args.max_s:.0f} s", file=sys.stderr)
    finally:
        stop(hogs)
    wall = time.monotonic() - started
    loads = sampler.samples or [os.getloadavg()[0]]
    print(
        f"beside_hogs: {args.hogs} hogs; exit {rc}; wall {wall:.1f} s; "
        f"load mean {sum(loads) / len(loads):.2f} max {max(loads):.2f} ({len(loads)} samples)"
    )
    return rc


if __name__ == "__main__":
    sys.exit(main())
