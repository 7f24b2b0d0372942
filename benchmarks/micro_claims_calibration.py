"""Calibration of the decision on claims about kernel micro-benchmarks (#36 item 5).

A claim ("1.15x faster per call", "3 us saved per call") is reproduced when the exact one-sided
sign-test lower bound of the per-pair speed-up (or time saved) clears the claim less its
tolerance, and not reproduced when the upper bound falls below it (`fasttrack.kinds.kernels`).
Simulated here as the pytest plugin records them: ``pairs`` pairs of per-call times, the reference
op's time and the candidate's drawn with log-normal noise around a true speed-up. Printed:

- false reproduction: the true speed-up exactly at the claim's floor (the claim, less its
  tolerance), so any "reproduced" is wrong; must be at most alpha (0.025);
- false rejection: the true speed-up at that floor again, any "not reproduced" is wrong (at most
  alpha by the upper bound's construction);
- power: how often a claim is reproduced when the kernel really is 10 % and 20 % faster than its
  floor, and rejected when it is 10 % and 20 % slower.

    python benchmarks/micro_claims_calibration.py [--seeds 2000] [--pairs 21] [--noise 0.1]
"""

from __future__ import annotations

import argparse
import math
import random

from fasttrack.kernel_bench import DEFAULT_PAIRS
from fasttrack.kinds.kernels.judge import NOT_REPRODUCED, REPRODUCED, decide
from fasttrack.kinds.kernels.micro import summarise

CLAIM = {"benchmark": "op", "speedup": 1.15, "tolerance": 0.05}
FLOOR = 1.15 * (1 - 0.05)


def one_run(rng: random.Random, true_speedup: float, pairs: int, noise: float) -> str | None:
    base = 20e-6  # 20 us per call for the reference op
    ref = [base * math.exp(rng.gauss(0, noise)) for _ in range(pairs)]
    cand = [r / true_speedup * math.exp(rng.gauss(0, noise)) for r in ref]
    timed = {"name": "op", "shape": [8, 256], "candidate_s": cand, "reference_s": ref}
    return decide(CLAIM, [summarise({"nodeid": "t", "outcome": "passed"}, timed)])


def rates(true_speedup: float, seeds: int, pairs: int, noise: float) -> tuple[float, float]:
    found = [one_run(random.Random(seed), true_speedup, pairs, noise) for seed in range(seeds)]
    return found.count(REPRODUCED) / seeds, found.count(NOT_REPRODUCED) / seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2000)
    parser.add_argument("--pairs", type=int, default=DEFAULT_PAIRS)
    parser.add_argument("--noise", type=float, default=0.1, help="sd of the log time per block, each op")
    args = parser.parse_args()
    print(
        f"claim 1.15x, tolerance 5 % (floor {FLOOR:.4f}); {args.pairs} pairs, noise sd {args.noise}, {args.seeds} seeds"
    )
    print(f"{'true speed-up':>22} {'reproduced':>11} {'not reproduced':>15}")
    for label, factor in (
        ("floor - 20 %", 0.8),
        ("floor - 10 %", 0.9),
        ("at the floor", 1.0),
        ("floor + 10 %", 1.1),
        ("floor + 20 %", 1.2),
    ):
        repro, rejected = rates(FLOOR * factor, args.seeds, args.pairs, args.noise)
        print(f"{label:>14} ({FLOOR * factor:.3f}) {repro:>11.4f} {rejected:>15.4f}")


if __name__ == "__main__":
    main()
