"""Benchmark the eval statistics: sequential vs fixed-n samples-to-verdict, paired vs unpaired
minimum detectable effect, and the wall time saved by the baseline cache.

    python benchmarks/stats_sequential.py                 # simulations + cache timing (fake targets)
    python benchmarks/stats_sequential.py --evidence E    # also paired vs unpaired MDE of real eval outcomes
    python benchmarks/stats_sequential.py --items I.jsonl --batch 24 --margin 0.05
                                 # real per-item scores (an eval check's items.jsonl artifact, in
                                 # evaluation order): paired vs unpaired MDE per bin, and the
                                 # sequential rule replayed against the fixed-n test on them
    python benchmarks/stats_sequential.py --sims 4000     # tighter error-rate estimates

Simulated data are 0/1 paired scores (an item is right or wrong on each side): a clean candidate
flips a few items each way (r→w = w→r), a regressed one flips more right→wrong.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fasttrack import stats as S

MARGIN, ALPHA = 0.05, 0.05


def paired_binary(rng, sims, n, r2w, w2r, p_base=0.7):
    u = rng.random((sims, n))
    d = np.where(u < r2w, -1.0, np.where(u < r2w + w2r, 1.0, 0.0))
    base = np.where(d == -1, 1.0, np.where(d == 1, 0.0, (rng.random((sims, n)) < p_base) * 1.0))
    return base, base + d


def fixed_n_codes(base, cand):
    codes = []
    for b, c in zip(base, cand):
        st = S.paired_comparison(b, c, margin=MARGIN, alpha=ALPHA).status
        codes.append({"passed": 1, "failed": -1}.get(st, 0))
    return np.array(codes)


def sequential_vs_fixed(rng, sims: int) -> None:
    print("## Sequential (anytime-valid betting CS) vs fixed-n, margin 0.05, alpha 0.05, looks every 25 items")
    print(
        f"{'scenario':<34}{'n_max':>6} | {'fixed: pass':>11}{'fail':>6}{'n':>6} | {'seq: pass':>9}{'fail':>6}"
        f"{'mean n':>8}{'median':>7}{'saved':>7}"
    )
    scenarios = [
        ("clean, 1% flips each way", 0.01, 0.01, 300),
        ("clean, 2% flips each way", 0.02, 0.02, 300),
        ("clean, 4% flips each way", 0.04, 0.04, 400),
        ("clean, identical outputs", 0.0, 0.0, 300),
        ("drop = margin (must not pass)", 0.075, 0.025, 300),
        ("drop = 2x margin (should fail)", 0.12, 0.02, 300),
        ("drop = 2x margin, 2.5x max", 0.12, 0.02, 800),
    ]
    for name, r2w, w2r, n_max in scenarios:
        base, cand = paired_binary(rng, sims, n_max, r2w, w2r)
        fixed = fixed_n_codes(base, cand)
        looks = list(range(25, n_max + 1, 25))
        code, used = S.sequential_stop_times(cand - base, margin=MARGIN, alpha=ALPHA, looks=looks)
        saved = 1 - used.mean() / n_max
        print(
            f"{name:<34}{n_max:>6} | {np.mean(fixed == 1):>11.3f}{np.mean(fixed == -1):>6.3f}{n_max:>6} | "
            f"{np.mean(code == 1):>9.3f}{np.mean(code == -1):>6.3f}{used.mean():>8.1f}{np.median(used):>7.0f}"
            f"{saved:>7.0%}"
        )
    print(
        "(fixed-n always evaluates n_max items; 'saved' = 1 - mean sequential n / n_max;"
        " pass at 'drop = margin' is the false-pass rate, which must stay <= alpha)\n"
    )


def paired_vs_unpaired(rng) -> None:
    print("## Minimum detectable effect, paired vs unpaired (simulated, n = 200 items, z_0.95 + z_0.8)")
    print(f"{'flips each way':>15}{'paired MDE':>12}{'unpaired MDE':>14}{'ratio':>7}{'items for same MDE':>20}")
    for flip in (0.01, 0.02, 0.05, 0.10):
        base, cand = paired_binary(rng, 200, 200, flip, flip)
        pcs = [S.paired_comparison(b, c, margin=MARGIN) for b, c in zip(base, cand)]
        paired = np.mean([p.mde for p in pcs])
        unpaired = np.mean([S.z_sum(ALPHA, 0.8) * p.unpaired_se for p in pcs])
        print(
            f"{flip:>15.0%}{paired:>12.4f}{unpaired:>14.4f}{unpaired / paired:>7.1f}x{(unpaired / paired) ** 2:>18.0f}x"
        )
    print(
        "(unpaired = what lm-eval's stderr / an unpaired z-test implies; 'items for same MDE' = how many times\n"
        " more items an unpaired test needs for the paired MDE)\n"
    )


def mde_from_evidence(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    print(f"## Paired vs unpaired MDE of the eval outcomes in {path.name}")
    z = S.z_sum(ALPHA, 0.8)
    for c in data.get("checks", data.get("outcomes", [])):
        m = c.get("measurements") or {}
        if m.get("se") is None or m.get("unpaired_se") is None:
            continue
        print(
            f"{c.get('name', c.get('id'))}: n={m.get('n')} paired MDE {z * m['se']:.4f}, unpaired {z * m['unpaired_se']:.4f}"
        )
    print()


def real_items(path: Path, batch: int, min_samples: int, margin: float) -> None:
    """Paired vs unpaired MDE and sequential vs fixed-n decisions on one eval's real per-item scores."""
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    base = np.array([i["baseline_score"] for i in items], dtype=float)
    cand = np.array([i["candidate_score"] for i in items], dtype=float)
    labels = [i.get("bin") or "all" for i in items]
    z = S.z_sum(ALPHA, 0.8)
    print(f"## Real items from {path.name}: n = {len(items)}, margin {margin:g}, alpha {ALPHA:g}")
    print(
        f"{'group':<12}{'n':>5}{'base':>7}{'cand':>7}{'diff':>8}{'paired MDE':>12}{'unpaired MDE':>14}{'ratio':>7}"
        f"{'fixed-n':>16}"
    )
    groups = {"overall": np.ones(len(items), dtype=bool)}
    if len(set(labels)) > 1:
        groups.update({b: np.array([lab == b for lab in labels]) for b in dict.fromkeys(labels)})
    for name, mask in groups.items():
        pc = S.paired_comparison(base[mask], cand[mask], margin=margin, alpha=ALPHA)
        unpaired = z * pc.unpaired_se
        ratio = f"{unpaired / pc.mde:.1f}x" if pc.mde > 0 else "inf"
        print(
            f"{name:<12}{pc.n:>5}{pc.baseline_mean:>7.3f}{pc.candidate_mean:>7.3f}{pc.diff:>8.4f}{pc.mde:>12.4f}"
            f"{unpaired:>14.4f}{ratio:>7}{pc.status + ('' if pc.status != 'not_run' else ' (n<' + str(pc.n_needed) + ')'):>16}"
        )
    # the runner's sequential procedure: looks after min_samples, then every batch; every group must settle
    looks = [k for k in range(batch, len(items) + 1, batch) if k >= min_samples] or [len(items)]
    if looks[-1] != len(items):
        looks.append(len(items))
    verdict, used = "inconclusive", len(items)
    for k in looks:
        decisions = []
        for mask in groups.values():
            d = (cand[:k] - base[:k])[mask[:k]]
            group_looks = [int(mask[:j].sum()) for j in looks if j <= k and mask[:j].sum() >= 1]
            decisions.append(S.sequential_decision(d, margin=margin, alpha=ALPHA, looks=group_looks).decision)
        if "failed" in decisions or all(x == "passed" for x in decisions):
            verdict, used = ("failed" if "failed" in decisions else "passed"), k
            break
    print(
        f"sequential (looks at {looks[0]}, every {batch}): {verdict} after {used} of {len(items)} items; "
        f"fixed-n evaluates all {len(items)}\n"
    )


class _SlowSolver:
    """A fake MRCR target that solves each row and takes `latency_s` per request."""

    def __init__(self, latency_s: float):
        self.latency_s = latency_s

    def apply_chat_template(self, messages):
        return json.dumps(messages)

    def generate(self, requests):
        out = []
        for r in requests:
            time.sleep(self.latency_s)
            msgs = json.loads(r["prompt"])
            m = re.match(r"Prepend (\S+) to the (\d+)\S* \(1 indexed\) (.+?)\. Do not", msgs[-1]["content"])
            hits = [
                msgs[i + 1]["content"] for i in range(len(msgs) - 1) if msgs[i]["content"] == f"write a {m.group(3)}"
            ]
            out.append(m.group(1) + hits[int(m.group(2)) - 1])
        return out


def cache_saving(latency_s: float) -> None:
    from fasttrack.kinds.evals.compare import run_eval_comparison
    from fasttrack.targets.lm_adapter import TargetLM

    data = ROOT / "examples" / "mini-k3" / "data" / "eval" / "mrcr.jsonl"
    if not data.is_file():
        print("## Baseline cache: skipped (no example MRCR data)\n")
        return
    cfg = {
        "id": "mrcr",
        "task": "mrcr_local",
        "task_dir": "checks/evals/mrcr",
        "data_files": str(data),
        "metric": "grade",
        "margin": 0.1,
        "alpha": 0.05,
        "generation": {"temperature": 0.0, "max_tokens": 64, "seed": 1},
    }
    identity = {"model": "fake-solver", "revision": "1", "code": "benchmark"}
    with tempfile.TemporaryDirectory() as cache:
        walls = []
        for _ in range(2):
            t0 = time.perf_counter()
            r = run_eval_comparison(
                cfg,
                TargetLM(_SlowSolver(latency_s), name="baseline"),
                TargetLM(_SlowSolver(latency_s), name="candidate"),
                root=ROOT,
                cache_dir=Path(cache),
                baseline_identity=identity,
            )
            walls.append(time.perf_counter() - t0)
        print(f"## Baseline cache (fake target, {latency_s * 1000:.0f} ms per request, {r.overall.n} MRCR items)")
        print(
            f"first run {walls[0]:.2f} s, second run {walls[1]:.2f} s ({walls[1] / walls[0]:.2f}x; target <= 0.6x), "
            f"baseline items from cache: {r.cache['baseline_hits']}\n"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sims", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--evidence", type=Path, help="an evidence.json with eval outcomes")
    ap.add_argument("--items", type=Path, help="an eval check's items.jsonl (per-item scores of both sides)")
    ap.add_argument("--batch", type=int, default=24, help="with --items: items between sequential looks")
    ap.add_argument("--min-samples", type=int, default=24, help="with --items: items before the first look")
    ap.add_argument("--margin", type=float, default=MARGIN, help="with --items: the eval's margin")
    ap.add_argument("--latency-ms", type=float, default=10.0, help="per-request latency of the fake target")
    ap.add_argument("--skip-cache", action="store_true")
    ap.add_argument("--skip-sims", action="store_true", help="no simulations (e.g. only --items)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    if not args.skip_sims:
        sequential_vs_fixed(rng, args.sims)
        paired_vs_unpaired(rng)
    if args.evidence:
        mde_from_evidence(args.evidence)
    if args.items:
        real_items(args.items, args.batch, args.min_samples, args.margin)
    if not args.skip_cache:
        cache_saving(args.latency_ms / 1000)


if __name__ == "__main__":
    main()
