"""Token-coverage probe: every id of the vocabulary through the candidate's prefill and decode paths.

Evaluations and the other probes feed the tokens their texts happen to contain; a kernel that is
wrong for one rare id (a bad embedding row, a lookup past a table's end, a special token the
latency path handles differently) never shows there. This probe builds sequences that contain
every id once (after a fixed first token, so that every id is also a *decode* input, not only the
prefill's first token), scores them teacher-forced on both sides, batched, and per fed id compares
the candidate's next-token distribution with stock's:

- on the candidate's prefill path and on its decode path (one decode step per position, all rows
  of a batch together), where the target can score both (`next_token_logprobs_batch`);
- every logit must be finite; KL(stock || candidate) and top-1 agreement over all fed ids must meet
  the manifest's divergence thresholds (mean KL, p99 KL, top-1 agreement), and no single id may
  exceed the p99 KL bound: such ids are named.

Deterministic (no sampling): the same code gives the same verdict every run. Stock scores by one
prefill pass (the reference, as in the divergence check).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fasttrack.exact import TOP1_ALPHA, shown_above
from fasttrack.probes.base import (
    CapabilityMissing,
    ProbeResult,
    ProbeTarget,
    TargetFailure,
    failed,
    not_run,
    passed,
)

PROBE = "token_coverage"
MAX_NAMED = 20


@dataclass(frozen=True)
class TokenCoverageSettings:
    batch: int = 64  # sequences scored together
    length: int = 32  # tokens per sequence: the first token and length - 1 fed ids
    max_mean_kl: float = 0.01
    max_p99_kl: float = 0.1
    min_top1_agreement: float = 0.98

    @staticmethod
    def from_mapping(values: Mapping[str, Any], divergence: Any = None) -> TokenCoverageSettings:
        base = TokenCoverageSettings()

        def threshold(name: str, default: float) -> float:
            value = getattr(divergence, name, None) if divergence is not None else None
            return float(value) if value is not None else default

        return TokenCoverageSettings(
            batch=int(values.get("batch", base.batch)),
            length=max(2, int(values.get("length", base.length))),
            max_mean_kl=threshold("max_mean_kl", base.max_mean_kl),
            max_p99_kl=threshold("max_p99_kl", base.max_p99_kl),
            min_top1_agreement=threshold("min_top1_agreement", base.min_top1_agreement),
        )


def layout(vocab: int, length: int, first: int) -> tuple[list[list[int]], np.ndarray]:
    """Rows of ``length`` tokens: ``first``, then the next ``length - 1`` ids, so that every id is
    fed once (the last row is filled up with ``first``); and which positions 1.. hold a fed id."""
    per_row = length - 1
    rows, real = [], []
    for start in range(0, vocab, per_row):
        ids = list(range(start, min(vocab, start + per_row)))
        rows.append([first, *ids, *([first] * (per_row - len(ids)))])
        real.append([True] * len(ids) + [False] * (per_row - len(ids)))
    return rows, np.asarray(real, dtype=bool)


def score_rows(target: ProbeTarget, rows: Sequence[Sequence[int]], through_decode: bool | None) -> np.ndarray:
    """``[B, T, V]`` teacher-forced logprobs of equal-length rows (``next_token_logprobs_batch``:
    through the decode path, one step per position, or one prefill pass; None: the side's own
    default). A target without it is scored one row at a time on its one path."""
    batched = getattr(target, "next_token_logprobs_batch", None)
    if callable(batched):
        return np.asarray(batched(rows, through_decode=through_decode), dtype=np.float64)
    if through_decode is not None:
        raise CapabilityMissing("the target cannot choose its scoring path (no next_token_logprobs_batch)")
    return np.stack([np.asarray(target.next_token_logprobs(list(r)), dtype=np.float64) for r in rows])


def probe_token_coverage(baseline: ProbeTarget, candidate: ProbeTarget, settings: TokenCoverageSettings) -> ProbeResult:
    try:
        first = baseline.tokenize("The")[0]
        vocab = int(np.asarray(baseline.next_token_logprobs([first])).shape[-1])
    except CapabilityMissing as exc:
        return not_run(PROBE, f"every-id coverage needs full next-token distributions: {exc}", "dependency")
    except TargetFailure as exc:
        return failed(PROBE, f"the baseline failed to score one token: {exc}", {}, code="target")
    rows, real = layout(vocab, settings.length, first)
    fed = np.asarray([r[1:] for r in rows])  # the id fed at positions 1.. of each row
    details: dict[str, Any] = {
        "vocab_size": vocab,
        "sequences": len(rows),
        "length": settings.length,
        "batch": settings.batch,
        "thresholds": {
            "max_mean_kl": settings.max_mean_kl,
            "max_p99_kl": settings.max_p99_kl,
            "min_top1_agreement": settings.min_top1_agreement,
        },
        "paths": {},
    }
    try:
        reference = np.concatenate(
            [score_rows(baseline, rows[i : i + settings.batch], None) for i in range(0, len(rows), settings.batch)]
        )
    except TargetFailure as exc:
        return failed(PROBE, f"scoring every token id on the baseline failed: {exc}", details, code="target")
    problems: list[str] = []
    for path, through_decode in (("prefill", False), ("decode", True)):
        try:
            scored = np.concatenate(
                [
                    score_rows(candidate, rows[i : i + settings.batch], through_decode)
                    for i in range(0, len(rows), settings.batch)
                ]
            )
        except CapabilityMissing as exc:
            details["paths"][path] = {"scored": False, "why": str(exc)}
            continue
        except TargetFailure as exc:
            return failed(
                PROBE, f"scoring every token id on the candidate's {path} path failed: {exc}", details, code="crashed"
            )
        found = compare(reference[:, 1:], scored[:, 1:], fed, real, settings)
        details["paths"][path] = {"scored": True, **found}
        if found["non_finite_ids"]:
            problems.append(f"{path}: non-finite logits after token id(s) {_ids(found['non_finite_ids'])}")
        if found["outlier_ids"]:
            problems.append(f"{path}: KL above {settings.max_p99_kl:g} after token id(s) {_ids(found['outlier_ids'])}")
        problems += [f"{path}: {p}" for p in found["threshold_problems"]]
    if problems:
        return failed(
            PROBE,
            f"not every token id works on the candidate ({len(problems)} problem(s)): " + "; ".join(problems),
            details,
            code="mismatch",
        )
    unscored = [p for p, d in details["paths"].items() if not d.get("scored")]
    if unscored:
        why = "; ".join(f"{p}: {details['paths'][p]['why']}" for p in unscored)
        return not_run(
            PROBE,
            f"the candidate's {', '.join(unscored)} path could not be scored per id ({why})",
            "dependency",
            details,
        )
    worst = max(d["max_kl"] or 0.0 for d in details["paths"].values())
    return passed(PROBE, details, statistic=worst)


def compare(
    base: np.ndarray, cand: np.ndarray, fed: np.ndarray, real: np.ndarray, settings: TokenCoverageSettings
) -> dict[str, Any]:
    """Per fed id: finite logits, KL(stock || candidate), top-1 agreement; and the thresholds."""
    finite = np.isfinite(cand).all(axis=-1)
    p = np.exp(base)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        terms = np.where(p > 0, p * (base - np.where(np.isfinite(cand), cand, -np.inf)), 0.0)
    kl = np.where(finite, np.maximum(terms.sum(axis=-1), 0.0), np.inf)
    agree = (base.argmax(axis=-1) == np.where(np.isfinite(cand), cand, -np.inf).argmax(axis=-1)) & finite
    ids, kl_real, agree_real, finite_real = fed[real], kl[real], agree[real], finite[real]
    non_finite = sorted({int(i) for i in ids[~finite_real]})
    outliers = sorted({int(i) for i in ids[finite_real & (kl_real > settings.max_p99_kl)]})
    fin = kl_real[finite_real]
    mean_kl = float(fin.mean()) if fin.size else math.inf
    p99 = float(np.quantile(fin, 0.99)) if fin.size else math.inf
    top1 = float(agree_real.mean()) if agree_real.size else 0.0
    problems = []
    if not mean_kl <= settings.max_mean_kl:
        problems.append(f"mean KL {mean_kl:.4g} > {settings.max_mean_kl:g}")
    if not p99 <= settings.max_p99_kl:
        problems.append(f"p99 KL {p99:.4g} > {settings.max_p99_kl:g}")
    disagree = int((~agree_real).sum())
    below, p_top1 = shown_above(disagree, int(agree_real.size), 1.0 - settings.min_top1_agreement, TOP1_ALPHA / 2)
    if below:  # a share of flips shown above the maximum, not a point estimate (fasttrack.stats)
        problems.append(f"top-1 agreement {top1:.4f} < {settings.min_top1_agreement:g} (binomial p {p_top1:.2g})")
    return {
        "ids": int(real.sum()),
        "mean_kl": mean_kl if math.isfinite(mean_kl) else None,
        "p99_kl": p99 if math.isfinite(p99) else None,
        "max_kl": float(fin.max()) if fin.size else None,
        "top1_agreement": top1,
        "non_finite_ids": non_finite,
        "outlier_ids": outliers,
        "threshold_problems": problems,
    }


def _ids(ids: Sequence[int]) -> str:
    shown = ", ".join(map(str, ids[:MAX_NAMED]))
    return shown + (f" (and {len(ids) - MAX_NAMED} more)" if len(ids) > MAX_NAMED else "")
