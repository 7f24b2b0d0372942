"""n > 1 probe: one request returns n separately seeded samples, reproducibly.

The candidate must return exactly n outputs; the same request (same seed) must give the same n
outputs again; and when the baseline's n samples differ from each other, the candidate's must
differ too (n copies of one sample is the classic bug). Greedy requests with n > 1 return n
copies of the baseline's greedy output.
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
    passed,
)
from fasttrack.probes.content import prompts as shipped_prompts

PROBE = "n_samples"


@dataclass(frozen=True)
class NSettings:
    n: int = 4
    prompts: tuple[str, ...] = ()
    max_tokens: int = 16
    temperature: float = 1.0
    seed: int = 4242

    @staticmethod
    def from_mapping(values: Mapping[str, Any]) -> NSettings:
        return NSettings(int(values.get("n", 4)), tuple(values.get("prompts") or shipped_prompts()["sampling"]),
                         int(values.get("max_tokens", 16)))


def probe_n_samples(baseline: ProbeTarget, candidate: ProbeTarget, settings: NSettings) -> ProbeResult:
    cases: list[dict[str, Any]] = []
    for i, prompt in enumerate(settings.prompts):
        sampled = CompletionRequest(prompt, max_tokens=settings.max_tokens, temperature=settings.temperature,
                                    seed=settings.seed + i, n=settings.n)
        greedy = CompletionRequest(prompt, max_tokens=settings.max_tokens, temperature=0.0, n=settings.n)
        try:
            base = [c.text for c in baseline.complete(sampled)]
            base_greedy = baseline.complete(greedy)[0].text
            first = [c.text for c in candidate.complete(sampled)]
            again = [c.text for c in candidate.complete(sampled)]
            cand_greedy = [c.text for c in candidate.complete(greedy)]
        except TargetFailure as exc:
            return failed(PROBE, f"an n={settings.n} request failed: {exc}", {"cases": cases}, code="target")
        cases.append({"prompt": prompt, "baseline_distinct": len(set(base)), "candidate_distinct": len(set(first)),
                      "candidate": first})
        if len(first) != settings.n or len(cand_greedy) != settings.n:
            return failed(PROBE, f"asked for n={settings.n}, the candidate returned {len(first)} sampled and {len(cand_greedy)} greedy outputs",
                          {"cases": cases})
        if first != again:
            return failed(PROBE, f"the same seeded n={settings.n} request gave different outputs on the candidate (prompt {i}): seed not honoured",
                          {"cases": cases})
        if len(set(base)) > 1 and len(set(first)) == 1:
            return failed(PROBE, (f"the candidate's {settings.n} samples are all identical ({clip(first[0], 40)}) while the "
                                  f"baseline's {len(set(base))} differ: the samples share one seed"), {"cases": cases})
        if any(t != base_greedy for t in cand_greedy):
            return failed(PROBE, f"greedy n={settings.n} outputs differ from the baseline's greedy output {clip(base_greedy, 50)}",
                          {"cases": cases})
    return passed(PROBE, {"cases": cases}, statistic=float(sum(c["candidate_distinct"] for c in cases)))
