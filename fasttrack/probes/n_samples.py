"""n > 1 probe: one request returns n separately seeded samples, reproducibly.

The candidate must return exactly n outputs; the same request (same seed) must give the same n
outputs again; and when the baseline's n samples differ from each other, the candidate's must
differ too (n copies of one sample is the classic bug). A greedy request with n > 1 returns n
identical rows, equal to the baseline's greedy output or differing from it only by a near-tie
flip (at the first differing token each side's choice is in the other's top-5, vLLM's
check_logprobs_close rule: stock and candidate kernels round differently in bf16 on a GPU).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from fasttrack.probes.base import (
    CompletionRequest,
    ProbeResult,
    ProbeTarget,
    RequestRefused,
    TargetFailure,
    clip,
    failed,
    passed,
    side_by_side,
)
from fasttrack.probes.content import prompts as shipped_prompts
from fasttrack.probes.logprobs import near_tie

PROBE = "n_samples"
GREEDY_TOP_K = 5  # logprobs asked for on the greedy requests, to tell a near-tie flip from a real difference


@dataclass(frozen=True)
class NSettings:
    n: int = 4
    prompts: tuple[str, ...] = ()
    max_tokens: int = 16
    temperature: float = 1.0
    seed: int = 4242

    @staticmethod
    def from_mapping(values: Mapping[str, Any]) -> NSettings:
        return NSettings(
            int(values.get("n", 4)),
            tuple(values.get("prompts") or shipped_prompts()["sampling"]),
            int(values.get("max_tokens", 16)),
            seed=int(values.get("seed", NSettings.seed)),
        )


def probe_n_samples(baseline: ProbeTarget, candidate: ProbeTarget, settings: NSettings) -> ProbeResult:
    cases: list[dict[str, Any]] = []
    for i, prompt in enumerate(settings.prompts):
        sampled = CompletionRequest(
            prompt,
            max_tokens=settings.max_tokens,
            temperature=settings.temperature,
            seed=settings.seed + i,
            n=settings.n,
        )
        greedy = CompletionRequest(
            prompt, max_tokens=settings.max_tokens, temperature=0.0, n=settings.n, logprobs=GREEDY_TOP_K
        )
        try:
            base, first, again, (base_greedy_row, refused), cand_greedy_rows = _ask(
                baseline, candidate, sampled, greedy
            )
        except TargetFailure as exc:
            return failed(PROBE, f"an n={settings.n} request failed: {exc}", {"cases": cases}, code="target")
        base_greedy, cand_greedy = greedy_texts(base_greedy_row, cand_greedy_rows, settings.n)
        cases.append(
            {
                "prompt": prompt,
                "baseline_distinct": len(set(base)),
                "candidate_distinct": len(set(first)),
                "candidate": first,
                "baseline_greedy": base_greedy,
                "candidate_greedy": cand_greedy,
                **({"greedy_refused_by_baseline": refused} if refused is not None else {}),
            }
        )
        if len(first) != settings.n or len(cand_greedy) != settings.n:
            return failed(
                PROBE,
                f"asked for n={settings.n}, the candidate returned {len(first)} sampled and {len(cand_greedy)} greedy outputs",
                {"cases": cases},
            )
        if first != again:
            return failed(
                PROBE,
                f"the same seeded n={settings.n} request gave different outputs on the candidate (prompt {i}): seed not honoured",
                {"cases": cases},
            )
        if len(set(base)) > 1 and len(set(first)) == 1:
            return failed(
                PROBE,
                (
                    f"the candidate's {settings.n} samples are all identical ({clip(first[0], 40)}) while the "
                    f"baseline's {len(set(base))} differ: the samples share one seed"
                ),
                {"cases": cases},
            )
        if len(set(cand_greedy)) > 1:
            return failed(
                PROBE,
                (
                    f"the {settings.n} rows of one greedy n={settings.n} request differ on the candidate "
                    f"({len(set(cand_greedy))} distinct): rows of a batch are not computed alike"
                ),
                {"cases": cases},
            )
        if base_greedy_row is not None and cand_greedy[0] != base_greedy:
            # Stock and candidate kernels round differently (bf16 on a GPU): a near-tie may flip, as
            # vLLM's check_logprobs_close allows; anything else is a real difference.
            flip = near_tie_flip(base_greedy_row, cand_greedy_rows[0])
            cases[-1]["greedy_diverged_at"] = flip
            if flip is None:
                return failed(
                    PROBE,
                    (
                        f"greedy n={settings.n} outputs differ from the baseline's greedy output "
                        f"{clip(base_greedy, 50)} (candidate: {clip(cand_greedy[0], 50)}), and not by a near tie: "
                        f"at the first differing token one side's choice is outside the other's top-{GREEDY_TOP_K} "
                        "(or no logprobs to tell)"
                    ),
                    {"cases": cases},
                )
    return passed(PROBE, {"cases": cases}, statistic=float(sum(c["candidate_distinct"] for c in cases)))


def _ask(baseline: ProbeTarget, candidate: ProbeTarget, sampled: CompletionRequest, greedy: CompletionRequest) -> Any:
    """Stock's and the candidate's sampled rows, the candidate's again, stock's greedy row (or why
    it refused) and the candidate's greedy rows. Where both sides are servers each pair of calls
    runs at once (stock first where sequential): 3 rounds instead of 5."""
    base_sampled, cand_first = side_by_side(
        baseline, candidate, partial(baseline.complete, sampled), partial(candidate.complete, sampled)
    )
    base = [c.text for c in base_sampled.get()]
    first = [c.text for c in cand_first.get()]
    stock_greedy, cand_again = side_by_side(
        baseline, candidate, partial(stock_row, baseline, greedy), partial(candidate.complete, sampled)
    )
    base_greedy_row, refused = stock_greedy.get()
    again = [c.text for c in cand_again.get()]
    cand_greedy_rows = candidate.complete(greedy) if refused is None else []
    return base, first, again, (base_greedy_row, refused), cand_greedy_rows


def greedy_texts(base_row: Any, cand_rows: Any, n: int) -> tuple[str, list[str]]:
    """The greedy texts to compare (blank rows where stock refused greedy n > 1)."""
    if base_row is None:
        return "", [""] * n
    return base_row.text, [c.text for c in cand_rows]


def stock_row(baseline: ProbeTarget, request: CompletionRequest) -> tuple[Any, str | None]:
    """The baseline's first row for ``request``, or why it refuses it as invalid (HTTP 4xx).
    Stock refusing greedy n > 1 (vLLM: "n must be 1 when using greedy sampling") leaves nothing
    there for the candidate to keep: the sampled rows are still checked."""
    try:
        return baseline.complete(request)[0], None
    except RequestRefused as exc:
        return None, str(exc)[:200]


def near_tie_flip(base: Any, cand: Any) -> int | None:
    """The first position where the greedy tokens differ, if there each side's token is in the
    other's top-k (check_logprobs_close); None when the difference is not such a flip."""
    if not base.logprobs or not cand.logprobs:
        return None
    for pos, (b, c) in enumerate(zip(base.logprobs, cand.logprobs)):
        if b.token_id != c.token_id:
            return pos if near_tie(b, c) else None
    return None
