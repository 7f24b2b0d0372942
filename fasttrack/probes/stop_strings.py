"""Stop-string probe: generation ends at a stop string exactly as on the baseline.

Declared stop strings may never occur in a model's greedy output, which would make the probe
vacuous; so besides them the probe takes a stop string that *does* occur (a short piece from the
middle of the baseline's unconstrained greedy output) for every prompt. The candidate's output
must never contain a stop string and must equal the baseline's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fasttrack.probes.base import (
    CompletionRequest,
    ProbeResult,
    ProbeTarget,
    TargetFailure,
    clip,
    failed,
    not_run,
    passed,
    serve_both,
    serve_each,
)
from fasttrack.probes.content import prompts as shipped_prompts

PROBE = "stop_strings"


@dataclass(frozen=True)
class StopSettings:
    stops: tuple[str, ...] = ("\n\n", "###")
    prompts: tuple[str, ...] = ()
    max_tokens: int = 32

    @staticmethod
    def from_mapping(values: Mapping[str, Any]) -> StopSettings:
        return StopSettings(
            tuple(values.get("stops") or StopSettings.stops),
            tuple(values.get("prompts") or shipped_prompts()["greedy"]),
            int(values.get("max_tokens", 32)),
        )


def derived_stop(text: str) -> str | None:
    """A 2-character piece of ``text`` starting near its middle that occurs there first."""
    for start in range(max(1, len(text) // 2), len(text) - 1):
        piece = text[start : start + 2]
        if piece.strip() and text.find(piece) == start:
            return piece
    return None


def probe_stop_strings(baseline: ProbeTarget, candidate: ProbeTarget, settings: StopSettings) -> ProbeResult:
    cases: list[dict[str, Any]] = []
    triggered = 0
    free_requests = [CompletionRequest(p, max_tokens=settings.max_tokens, temperature=0.0) for p in settings.prompts]
    try:
        frees = [answer[0].text for answer in serve_each(baseline, free_requests)]
    except TargetFailure as exc:
        return failed(PROBE, f"the baseline failed a greedy request: {exc}", {"cases": cases}, code="target")
    asked: list[tuple[str, str, str]] = []  # (prompt, its free output, stop)
    for prompt, free in zip(settings.prompts, frees, strict=True):
        extra = derived_stop(free)
        asked += [(prompt, free, stop) for stop in (*settings.stops, *([extra] if extra is not None else []))]
    requests = [
        CompletionRequest(prompt, max_tokens=settings.max_tokens, temperature=0.0, stop=(stop,))
        for prompt, _free, stop in asked
    ]
    try:
        bases, cands = serve_both(baseline, candidate, requests)
    except TargetFailure as exc:
        return failed(PROBE, f"a request with a stop string failed: {exc}", {"cases": cases}, code="target")
    for (prompt, free, stop), base_answer, cand_answer in zip(asked, bases, cands, strict=True):
        base, cand = base_answer[0], cand_answer[0]
        hit = stop in free
        triggered += hit
        cases.append(
            {
                "prompt": prompt,
                "stop": stop,
                "occurs_without_stop": hit,
                "baseline": base.text,
                "candidate": cand.text,
                "finish_reason": cand.finish_reason,
            }
        )
        if stop in cand.text:
            return failed(
                PROBE,
                f"the candidate's output contains the stop string {stop!r}: {clip(cand.text)}",
                {"cases": cases},
            )
        if cand.text != base.text:
            return failed(
                PROBE,
                (
                    f"with stop {stop!r} the candidate's output {clip(cand.text, 50)} differs from the "
                    f"baseline's {clip(base.text, 50)}"
                ),
                {"cases": cases},
            )
    details = {"cases": cases, "triggered": triggered}
    if not triggered:
        return not_run(
            PROBE, "no stop string occurred in any output, so stopping was never exercised", "underpowered", details
        )
    return passed(PROBE, details, statistic=float(triggered))
