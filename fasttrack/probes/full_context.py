"""Full-context probe: a request at the declared maximum context works, and stays accurate far out.

A prompt of ``max_context - max_tokens`` tokens (shipped filler text, repeated) is sent to the
candidate with ``max_tokens`` more to generate: it must succeed and generate them. Then both sides
score the whole sequence teacher-forced, and the per-position KL(baseline || candidate) and top-1
agreement are summarised per position bucket: every bucket, the far ones included, must stay
within the manifest's divergence thresholds (long-context numerical bugs show up only there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from fasttrack.probes.base import (
    CapabilityMissing,
    CompletionRequest,
    ProbeResult,
    ProbeTarget,
    TargetFailure,
    failed,
    not_run,
    passed,
)
from fasttrack.probes.content import prompts as shipped_prompts

PROBE = "full_context"
TOP_K = 20  # prompt logprobs asked of servers that return only the top-k (vLLM's default limit)
MAX_RESIDUAL_MASS = 0.05  # top-k must cover 95 % of the baseline's mass for a lumped-KL pass


@dataclass(frozen=True)
class FullContextSettings:
    max_context: int | None = None  # default: the manifest's scope.context.max_tokens, else the target's
    max_tokens: int = 8
    prompt_tokens: int | None = None
    buckets: tuple[int, ...] = ()  # bucket edges; default: quarters of the context
    max_mean_kl: float = 0.01
    max_p99_kl: float = 0.1
    min_top1_agreement: float = 0.98

    @staticmethod
    def from_mapping(
        values: Mapping[str, Any], divergence: Any = None, max_context: int | None = None
    ) -> FullContextSettings:
        base = FullContextSettings()

        def threshold(name: str, default: float) -> float:
            value = getattr(divergence, name, None) if divergence is not None else None
            return float(value) if value is not None else default

        return FullContextSettings(
            max_context=max_context,
            max_tokens=int(values.get("max_tokens", base.max_tokens)),
            prompt_tokens=values.get("prompt_tokens"),
            buckets=tuple(getattr(divergence, "buckets", ()) or ()),
            max_mean_kl=threshold("max_mean_kl", base.max_mean_kl),
            max_p99_kl=threshold("max_p99_kl", base.max_p99_kl),
            min_top1_agreement=threshold("min_top1_agreement", base.min_top1_agreement),
        )


def position_kl(base_logprobs: np.ndarray, cand_logprobs: np.ndarray) -> np.ndarray:
    """KL(baseline || candidate) per position, from ``[T, V]`` log-probability rows."""
    p = np.exp(base_logprobs)
    return np.maximum((p * (base_logprobs - cand_logprobs)).sum(axis=-1), 0.0)


def bucket_summary(
    kl: np.ndarray, agree: np.ndarray, edges: Sequence[int], settings: FullContextSettings
) -> list[dict[str, Any]]:
    """Per position bucket [start, end): n, mean and p99 KL, top-1 agreement, within thresholds."""
    rows = []
    for start, end in pairwise(edges):
        part = slice(start, min(end, len(kl)))
        n = max(0, min(end, len(kl)) - start)
        if n <= 0:
            continue
        mean_kl, p99 = float(kl[part].mean()), float(np.quantile(kl[part], 0.99))
        top1 = float(agree[part].mean())
        ok = mean_kl <= settings.max_mean_kl and p99 <= settings.max_p99_kl and top1 >= settings.min_top1_agreement
        rows.append(
            {
                "start": int(start),
                "end": int(end),
                "n": int(n),
                "mean_kl": mean_kl,
                "p99_kl": p99,
                "top1_agreement": top1,
                "passed": ok,
            }
        )
    return rows


def long_prompt(target: ProbeTarget, length: int) -> list[int]:
    """``length`` token ids of the shipped filler text, repeated."""
    unit = target.tokenize(shipped_prompts()["filler"])
    ids = (unit * (length // max(1, len(unit)) + 1))[:length]
    return ids


def probe_full_context(baseline: ProbeTarget, candidate: ProbeTarget, settings: FullContextSettings) -> ProbeResult:
    max_context = settings.max_context or candidate.max_context
    prompt_len = settings.prompt_tokens or max_context - settings.max_tokens
    ids = long_prompt(baseline, prompt_len)
    request = CompletionRequest(tuple(ids), max_tokens=settings.max_tokens, temperature=0.0, ignore_eos=True)
    details: dict[str, Any] = {
        "max_context": max_context,
        "prompt_tokens": prompt_len,
        "max_tokens": settings.max_tokens,
        "thresholds": {
            "max_mean_kl": settings.max_mean_kl,
            "max_p99_kl": settings.max_p99_kl,
            "min_top1_agreement": settings.min_top1_agreement,
        },
    }
    try:
        out = candidate.complete(request)[0]
    except TargetFailure as exc:
        return failed(
            PROBE,
            f"the candidate failed a request of {prompt_len} + {settings.max_tokens} = {prompt_len + settings.max_tokens} "
            f"tokens (the declared maximum context {max_context}): {exc}",
            details,
            code="crashed",
        )
    details["finish_reason"] = out.finish_reason
    if out.finish_reason == "error" or len(out.token_ids) != settings.max_tokens:
        return failed(
            PROBE,
            (
                f"at the maximum context the candidate generated {len(out.token_ids)} of {settings.max_tokens} tokens "
                f"(finish_reason {out.finish_reason!r})"
            ),
            details,
            code="crashed",
        )
    # Row t predicts token t+1: the last token's own prediction lies beyond the context, so the
    # first max_context - 1 tokens give every in-context distribution.
    generated = list(out.token_ids)
    if any(t < 0 for t in generated):  # a server that spells tokens as text: re-tokenize what it wrote
        generated = baseline.tokenize(out.text)
    sequence = (ids + generated)[: max_context - 1]
    rows = {}
    for side in (baseline, candidate):
        try:
            rows[side.name] = side.next_token_logprobs(sequence)
        except CapabilityMissing:
            return _top_k_comparison(baseline, candidate, sequence, settings, details)
        except TargetFailure as exc:
            return failed(
                PROBE,
                f"teacher-forced scoring of {len(sequence)} tokens failed on the {side.name}: {exc}",
                details,
                code="crashed",
            )
    base_rows, cand_rows = rows[baseline.name], rows[candidate.name]
    if not np.isfinite(cand_rows).any(axis=-1).all():
        return failed(
            PROBE, "the candidate produced non-finite logprobs at the maximum context", details, code="mismatch"
        )
    kl = position_kl(base_rows, cand_rows)
    agree = base_rows.argmax(axis=-1) == cand_rows.argmax(axis=-1)
    return _decide(kl, agree, settings, details)


def _decide(
    kl: np.ndarray,
    agree: np.ndarray,
    settings: FullContextSettings,
    details: dict[str, Any],
    residual: float | None = None,
) -> ProbeResult:
    edges = (
        sorted({0, *[e for e in settings.buckets if 0 < e < len(kl)], len(kl)})
        if settings.buckets
        else sorted({0, len(kl) // 4, len(kl) // 2, 3 * len(kl) // 4, len(kl)})
    )
    buckets = bucket_summary(kl, agree, edges, settings)
    details["buckets"] = buckets
    bad = [b for b in buckets if not b["passed"]]
    far = buckets[-1]
    if bad:
        b = bad[-1]
        return failed(
            PROBE,
            (
                f"teacher-forced distributions diverge at positions {b['start']}-{b['end']}: mean KL {b['mean_kl']:.4g} "
                f"(max {settings.max_mean_kl}), p99 KL {b['p99_kl']:.4g} (max {settings.max_p99_kl}), top-1 agreement "
                f"{b['top1_agreement']:.3f} (min {settings.min_top1_agreement})"
            ),
            details,
            code="regression",
            statistic=b["mean_kl"],
        )
    if residual is not None and residual > MAX_RESIDUAL_MASS:
        return not_run(
            PROBE,
            (
                f"the top-k logprobs cover only {1 - residual:.1%} of the baseline's probability on average, so the "
                f"lumped KL (a lower bound) cannot show the divergence is within {settings.max_mean_kl}; "
                "ask the server for more logprobs"
            ),
            "underpowered",
            details,
        )
    return passed(PROBE, details, statistic=far["mean_kl"])


def lumped_kl(base_top: Mapping[int, float], cand_top: Mapping[int, float]) -> float:
    """KL(baseline || candidate) over the tokens in both top-k lists plus one "rest" category.

    Merging categories never increases a KL divergence, so this is a lower bound of the true KL:
    a value above the threshold proves a divergence; a value below it is conclusive only when the
    rest holds little mass (see MAX_RESIDUAL_MASS).
    """
    shared = [t for t in base_top if t in cand_top]
    p = np.exp([base_top[t] for t in shared]) if shared else np.zeros(0)
    q = np.exp([cand_top[t] for t in shared]) if shared else np.zeros(0)
    p_rest, q_rest = max(0.0, 1.0 - float(p.sum())), max(1e-12, 1.0 - float(q.sum()))
    value = float((p * (np.log(np.maximum(p, 1e-300)) - np.log(np.maximum(q, 1e-300)))).sum())
    if p_rest > 0:
        value += p_rest * (np.log(p_rest) - np.log(q_rest))
    return max(0.0, value)


def _top_k_comparison(
    baseline: ProbeTarget,
    candidate: ProbeTarget,
    sequence: list[int],
    settings: FullContextSettings,
    details: dict[str, Any],
) -> ProbeResult:
    """Far-position divergence from servers that return only the top-k of each distribution."""
    tops = {}
    for side in (baseline, candidate):
        scorer = getattr(side, "prompt_top_logprobs", None)
        if scorer is None:
            return not_run(
                PROBE,
                "the request at full context succeeded, but the target returns neither full distributions nor "
                "prompt logprobs, so far-position divergence cannot be measured",
                "dependency",
                details,
            )
        try:
            tops[side.name] = scorer(sequence, TOP_K)
        except CapabilityMissing as exc:
            return not_run(
                PROBE,
                f"the request at full context succeeded, but far-position divergence cannot be measured: {exc}",
                "dependency",
                details,
            )
        except TargetFailure as exc:
            return failed(
                PROBE,
                f"teacher-forced scoring of {len(sequence)} tokens failed on the {side.name}: {exc}",
                details,
                code="crashed",
            )
    base, cand = tops[baseline.name][1:], tops[candidate.name][1:]  # entry t+1 is row t of the full-distribution case
    kl = np.array([lumped_kl(b or {}, c or {}) for b, c in zip(base, cand)])
    agree = np.array([bool(b) and bool(c) and max(b, key=b.get) == max(c, key=c.get) for b, c in zip(base, cand)])
    residual = float(np.mean([max(0.0, 1.0 - float(np.exp(list((b or {0: 0.0}).values())).sum())) for b in base]))
    details.update({"method": f"top-{TOP_K} lumped KL (a lower bound of the KL)", "mean_residual_mass": residual})
    return _decide(kl, agree, settings, details, residual=residual)
