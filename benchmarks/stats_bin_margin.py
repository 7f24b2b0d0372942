"""Calibrate evals with length bins judged at a wider margin (``bins.margin``), bins interleaved:
the false-fail rate on clean candidates (must stay <= alpha), the false-pass rate at the margins,
the power against regressions, and how many items each needs.

    python benchmarks/stats_bin_margin.py                  # 1000 simulations per scenario
    python benchmarks/stats_bin_margin.py --sims 4000 --bin-margin 0.10

Simulated data are 0/1 paired scores in three equal bins of 80 items (MRCR's shape): per bin a
candidate flips right->wrong and wrong->right at given rates. The rule is the gate's own
(`fasttrack.kinds.evals.items.interleaved` and `sequential_step`): items one per bin in turn, a
look every `--batch` items after `--min-samples`, overall at the eval's margin in cycles of three,
each bin at the bin margin; settled once any test fails or all pass.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fasttrack.kinds.evals.items import interleaved, sequential_step
from fasttrack.kinds.evals.tasks import ItemRecord

BINS, PER_BIN = ("short", "mid", "long"), 80


def simulate(rng: np.random.Generator, flips: list[tuple[float, float]], args: argparse.Namespace) -> tuple[str, int]:
    """One eval run: (verdict, items used)."""
    labels = {i: BINS[i // PER_BIN] for i in range(PER_BIN * len(BINS))}
    base, cand = {}, {}
    for i, b in labels.items():
        r2w, w2r = flips[BINS.index(b)]
        u = rng.random()
        d = -1.0 if u < r2w else (1.0 if u < r2w + w2r else 0.0)
        b_score = 1.0 if d == -1 else (0.0 if d == 1 else float(rng.random() < 0.9))
        base[i] = ItemRecord(i, "", "", None, b_score, ())
        cand[i] = ItemRecord(i, "", "", None, b_score + d, ())
    order = list(range(len(labels)))
    rng.shuffle(order)
    order = interleaved(order, labels, BINS)
    state: dict = {}
    looks: list[int] = []
    for n in range(args.min_samples, len(order) + 1, args.batch):
        looks.append(n)
        settled = sequential_step(
            order[:n], base, cand, labels, looks, args.margin, args.alpha, len(order), state,
            bin_margin=args.bin_margin, block=len(BINS),
        )  # fmt: skip
        if settled:
            decisions = [s.decision for s in state.values()]
            return ("failed" if "failed" in decisions else "passed"), n
    return "inconclusive", len(order)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--margin", type=float, default=0.05)
    ap.add_argument("--bin-margin", type=float, default=0.15)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--batch", type=int, default=15)
    ap.add_argument("--min-samples", type=int, default=75)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    m, bm = args.margin, args.bin_margin
    scenarios = [  # name, per-bin (r->w, w->r), what must hold
        ("clean, identical outputs", [(0.0, 0.0)] * 3, "fail <= alpha"),
        ("clean, 1% flips each way", [(0.01, 0.01)] * 3, "fail <= alpha"),
        ("clean, 2% flips each way", [(0.02, 0.02)] * 3, "fail <= alpha"),
        ("overall drop = margin", [(m, 0.0)] * 3, "pass <= alpha"),
        ("one bin drop = bin margin", [(0.0, 0.0), (0.0, 0.0), (bm, 0.0)], "pass <= alpha"),
        ("one bin drop = 2x bin margin", [(0.0, 0.0), (0.0, 0.0), (2 * bm, 0.0)], "power: fail"),
        ("overall drop = 2x margin", [(2 * m, 0.0)] * 3, "power: fail"),
    ]
    print(
        f"## Bins at a wider margin: margin {m:g}, bins.margin {bm:g}, alpha {args.alpha:g}, 3 bins x {PER_BIN}, "
        f"looks at {args.min_samples} then every {args.batch}, {args.sims} runs each"
    )
    print(f"{'scenario':<32}{'pass':>7}{'fail':>7}{'undecided':>10}{'mean n':>8}{'median n':>9}   must")
    for name, flips, must in scenarios:
        runs = [simulate(rng, flips, args) for _ in range(args.sims)]
        verdicts = np.array([v for v, _ in runs])
        used = np.array([n for _, n in runs])
        print(
            f"{name:<32}{np.mean(verdicts == 'passed'):>7.3f}{np.mean(verdicts == 'failed'):>7.3f}"
            f"{np.mean(verdicts == 'inconclusive'):>10.3f}{used.mean():>8.1f}{np.median(used):>9.0f}   {must}"
        )


if __name__ == "__main__":
    main()
