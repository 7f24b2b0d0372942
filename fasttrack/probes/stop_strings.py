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
    for prompt in settings.prompts:
        try:
            free = baseline.complete(CompletionRequest(prompt, max_tokens=settings.max_tokens, temperature=0.0))[0].text
        except TargetFailure as exc:
            return failed(PROBE, f"the baseline failed a greedy request: {exc}", {"cases": cases}, code="target")
        stops = list(settings.stops)
        extra = derived_stop(free)
        if extra is not None:
            stops.append(extra)
        for stop in stops:
            request = CompletionRequest(prompt, max_tokens=settings.max_tokens, temperature=0.0, stop=(stop,))
            try:
                base = baseline.complete(request)[0]
                cand = candidate.complete(request)[0]
            except TargetFailure as exc:
                return failed(PROBE, f"a request with stop {stop!r} failed: {exc}", {"cases": cases}, code="target")
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
