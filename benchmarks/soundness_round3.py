"""False-fail rate and detection of the round-3 rules on fasttrack's fake target (issue 34):
the mixed-batch probe (clean pairs vs a candidate sampling every row with the first row's
temperature/top_p) and acceptance against stock (clean drafters vs one off by one on every second
step). Used by ``benchmarks/false_alarms.py --only round3``; runnable alone:

    python benchmarks/soundness_round3.py --seeds 200 --workers 2
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from scipy import stats

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from fasttrack.probes.base import CapabilityMissing, Completion, CompletionRequest
from fasttrack.probes.fake import FakeTarget


class TopKOnly(FakeTarget):
    """A side without full distributions (an HTTP server's view)."""

    def next_token_logprobs(self, token_ids: Sequence[int]) -> Any:
        raise CapabilityMissing("top-k only")


class FirstRowSampling(FakeTarget):
    """The planted batching bug: every row sampled with the first row's temperature and top_p."""

    def complete_batch(self, requests: Sequence[CompletionRequest]) -> list[list[Completion]]:
        first = requests[0]
        return super().complete_batch([replace(r, temperature=first.temperature, top_p=first.top_p) for r in requests])


def mixed_trial(seed: int, two_sample: bool = False, leaky: bool = False, samples: int = 200) -> dict[str, Any]:
    from fasttrack.probes.mixed_batch import MixedBatchSettings, probe_mixed_batches

    settings = MixedBatchSettings(samples=samples, alpha=0.01, seed=seed * 101)
    baseline = TopKOnly("baseline") if two_sample else FakeTarget("baseline")
    kind = FirstRowSampling if leaky else FakeTarget
    candidate = kind("candidate", noise=1e-4, noise_seed=seed)
    result = probe_mixed_batches(baseline, candidate, settings)
    return {"failed": result.status == "failed", "status": result.status}


def acceptance_trial(seed: int, degraded: bool = False) -> dict[str, Any]:
    """The speculative check's acceptance rules (floor 1.2, 10 % behind stock) at a random draft length."""
    import numpy as np

    from fasttrack.kinds.speculative.run import check_draft_length
    from fasttrack.kinds.speculative.stock import judge_against_stock, per_prompt_acceptance
    from fasttrack.probes.content import prompts

    rng = np.random.default_rng(seed)
    pool = list(prompts()["speculative"])
    chosen = [pool[i] for i in rng.choice(len(pool), size=min(3, len(pool)), replace=False)]
    draft = int(rng.integers(1, 8))
    faults = frozenset({"draft_off_by_one"}) if degraded else frozenset()
    spec = FakeTarget("candidate", faults=faults, draft_length=draft, noise=1e-4, noise_seed=seed)
    result = check_draft_length(FakeTarget("candidate", noise=1e-4, noise_seed=seed), spec, draft, 1.2, chosen)
    if result.status == "passed":
        counters, per_prompt = per_prompt_acceptance(FakeTarget("baseline", draft_length=draft), chosen, 48)
        result = judge_against_stock(result, counters, per_prompt, 0.1)
    return {"failed": result.status == "failed", "status": result.status}


CASES: tuple[tuple[str, Any, dict[str, Any], float | None], ...] = (
    # label, trial, arguments, nominal false-fail rate (None: a detection rate)
    ("mixed batches, one-sample, clean (alpha 0.01)", mixed_trial, {}, 0.01),
    ("mixed batches, two-sample fallback, clean (alpha 0.01)", mixed_trial, {"two_sample": True}, 0.01),
    ("mixed batches, first-row temperature leak: detected", mixed_trial, {"leaky": True}, None),
    ("mixed batches, two-sample, first-row leak: detected", mixed_trial, {"leaky": True, "two_sample": True}, None),
    ("acceptance vs stock (10 %), clean drafter", acceptance_trial, {}, 0.0),
    ("acceptance vs stock (10 %), drafter off by one: detected", acceptance_trial, {"degraded": True}, None),
)


class _Call:
    def __init__(self, fn: Any, kwargs: dict[str, Any]) -> None:
        self.fn, self.kwargs = fn, kwargs

    def __call__(self, seed: int) -> dict[str, Any]:
        return self.fn(seed, **self.kwargs)


def rows(seeds: int, workers: int, detection_seeds: int | None = None) -> list[str]:
    lines = []
    for label, fn, kwargs, nominal in CASES:
        n = seeds if nominal is not None else (detection_seeds or seeds)
        call = _Call(fn, kwargs)
        if workers > 1:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                found = list(pool.map(call, range(1, n + 1)))
        else:
            found = [call(s) for s in range(1, n + 1)]
        fails = sum(r["failed"] for r in found)
        low, high = stats.binomtest(fails, n).proportion_ci(0.95, method="exact")
        what = f"nominal {nominal:g}" if nominal is not None else "detection rate"
        lines.append(f"{label}: {fails}/{n} failed = {fails / n:.3f} [95 % CI {low:.3f}, {high:.3f}] ({what})")
        print(lines[-1], flush=True)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--detection-seeds", type=int, default=None)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--only", default="", help="comma-separated label words: run the cases whose label has one")
    args = parser.parse_args(argv)
    global CASES
    if args.only:
        words = [w.strip() for w in args.only.split(",")]
        CASES = tuple(c for c in CASES if any(w in c[0] for w in words))
    rows(args.seeds, args.workers, args.detection_seeds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
