"""How far two correct paths of the example drift apart at a dtype, as the divergence check sees it
(issue 34): the example's stock and latency paths (or the planted fault ``mask_in_model_dtype``)
teacher-forced through their decode paths on the longest MRCR prompts, per-position KL and top-1
agreement summarised per position, per 256-position bucket and per 16-position window (the width
of the full-context probe's edge windows, which share the thresholds). The figures behind the
built-in bf16 thresholds (`fasttrack.manifest.divergence`, docs/measurements.md):

    OMP_NUM_THREADS=1 python benchmarks/dtype_noise.py --dtype bf16 --prompts 8
    OMP_NUM_THREADS=1 python benchmarks/dtype_noise.py --dtype bf16 --prompts 1 --fault
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "mini-k3"
sys.path[:0] = [str(REPO), str(EXAMPLE)]

from fasttrack.kinds.divergence.run import _as_logprobs, _tokens, position_divergence, texts_from_eval
from fasttrack.kinds.evals.compare import as_eval_config
from fasttrack.manifest import load_manifest


def windows(kls: list[np.ndarray], agrees: list[np.ndarray], width: int) -> str:
    """The largest mean, 99th percentile and disagreement count over every ``width``-position window."""
    means, p99s, flips = [], [], []
    for kl, agree in zip(kls, agrees):
        for start in range(0, len(kl) - width + 1):
            part = kl[start : start + width]
            means.append(part.mean())
            p99s.append(np.percentile(part, 99))
            flips.append(int((~agree[start : start + width]).sum()))
    return f"{width}-position windows: mean max {max(means):.4g}, p99 max {max(p99s):.4g}, top-1 flips max {max(flips)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--prompts", type=int, default=8, help="the longest MRCR prompts (default 8)")
    parser.add_argument("--positions", type=int, default=1024)
    parser.add_argument("--fault", action="store_true", help="the candidate with mask_in_model_dtype")
    args = parser.parse_args()
    import torch

    from mini_k3.faults import create

    torch.set_num_threads(1)
    manifest = load_manifest(EXAMPLE / "fasttrack.yaml")
    base = create(dtype=args.dtype, device="cpu")
    cand = create(dtype=args.dtype, device="cpu", latency_specialized=True, mask_in_model_dtype=args.fault)
    mrcr = next(e for e in manifest.evals if e.id == "mrcr")
    texts = texts_from_eval(as_eval_config(mrcr), manifest.root, base.apply_chat_template, args.prompts)
    kls, agrees = [], []
    for n, text in enumerate(texts):
        ids = _tokens(base, text, args.positions)
        kl, agree = position_divergence(
            _as_logprobs(base.next_token_logprobs(ids)), _as_logprobs(cand.next_token_logprobs(ids))
        )
        kls.append(kl)
        agrees.append(agree)
        buckets = [
            f"{lo}-{lo + 256}: mean {kl[lo : lo + 256].mean():.4g} p99 {np.percentile(kl[lo : lo + 256], 99):.3g} "
            f"top-1 {agree[lo : lo + 256].mean():.3f}"
            for lo in range(0, len(kl) - 255, 256)
        ]
        print(f"prompt {n}: " + " | ".join(buckets), flush=True)
    kl, agree = np.concatenate(kls), np.concatenate(agrees)
    print(
        f"{args.dtype}{' fault' if args.fault else ''}, {len(kl)} positions: mean {kl.mean():.4g}, median "
        f"{np.median(kl):.3g}, p99 {np.percentile(kl, 99):.3g}, p99.9 {np.percentile(kl, 99.9):.3g}, max "
        f"{kl.max():.3g}; above 1 nat {(kl > 1).mean():.2%}; top-1 flips {1 - agree.mean():.2%}"
    )
    print(windows(kls, agrees, 256))
    print(windows(kls, agrees, 16))


if __name__ == "__main__":
    main()
