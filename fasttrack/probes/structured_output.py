"""Structured-output probe: JSON-schema constrained requests keep working on the candidate.

For each schema: greedy output and a few seeded samples from the candidate must parse as JSON and
validate against the schema (jsonschema, Draft 2020-12), and the candidate's greedy output must
equal the baseline's (the grammar mask and the model agree on every token).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from fasttrack.probes.base import (
    CompletionRequest,
    ProbeResult,
    ProbeTarget,
    TargetFailure,
    clip,
    failed,
    first_difference,
    passed,
)
from fasttrack.probes.content import default_schema_paths, load_schema_file, prompt_for_schema

PROBE = "structured_output"


@dataclass(frozen=True)
class StructuredSettings:
    schemas: tuple[Path, ...]
    samples: int = 3  # seeded samples per schema, besides the greedy request
    max_tokens: int = 160
    temperature: float = 1.0
    seed: int = 99

    @staticmethod
    def from_mapping(values: Mapping[str, Any], resolve=Path) -> StructuredSettings:
        paths = tuple(resolve(p) for p in values.get("schemas") or ()) or tuple(default_schema_paths())
        return StructuredSettings(paths, int(values.get("samples", 3)), int(values.get("max_tokens", 160)))


def validation_error(text: str, schema: Mapping[str, Any]) -> str | None:
    """None when ``text`` is JSON that satisfies ``schema``; else what is wrong, in one line."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg} at char {exc.pos})"
    errors = sorted(Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in errors[0].absolute_path)
        return f"{where}: {errors[0].message}"
    return None


def probe_structured_output(baseline: ProbeTarget, candidate: ProbeTarget, settings: StructuredSettings) -> ProbeResult:
    rows: list[dict[str, Any]] = []
    for path in settings.schemas:
        schema = load_schema_file(path)
        prompt = prompt_for_schema(path)
        greedy = CompletionRequest(prompt, max_tokens=settings.max_tokens, temperature=0.0, json_schema=schema)
        sampled = [
            CompletionRequest(
                prompt,
                max_tokens=settings.max_tokens,
                temperature=settings.temperature,
                seed=settings.seed + i,
                json_schema=schema,
            )
            for i in range(settings.samples)
        ]
        try:
            base_out = baseline.complete(greedy)[0]
        except TargetFailure as exc:
            return failed(
                PROBE, f"the baseline failed the {path.name} request: {exc}", {"schemas": rows}, code="target"
            )
        try:
            cand_out = candidate.complete(greedy)[0]
            cand_samples = [candidate.complete(r)[0] for r in sampled]
        except TargetFailure as exc:
            return failed(
                PROBE, f"the candidate failed the {path.name} request: {exc}", {"schemas": rows}, code="target"
            )
        row = {
            "schema": path.name,
            "baseline": base_out.text,
            "candidate": cand_out.text,
            "samples": [c.text for c in cand_samples],
            "baseline_valid": validation_error(base_out.text, schema) is None,
        }
        rows.append(row)
        for label, out in [("greedy", cand_out)] + [
            (f"sample {i} (seed {r.seed})", c) for i, (r, c) in enumerate(zip(sampled, cand_samples))
        ]:
            problem = validation_error(out.text, schema)
            if problem is not None:
                also = (
                    " (the baseline's greedy output is invalid too: the stock path shares the problem)"
                    if not row["baseline_valid"]
                    else ""
                )
                return failed(
                    PROBE,
                    f"candidate {label} output for {path.name} violates the schema: {problem}; output {clip(out.text)}{also}",
                    {"schemas": rows},
                )
        at = first_difference(base_out.token_ids or base_out.text, cand_out.token_ids or cand_out.text)
        if base_out.text != cand_out.text or at is not None:
            return failed(
                PROBE,
                (
                    f"greedy output for {path.name} differs from the baseline at token {at}: "
                    f"baseline {clip(base_out.text, 60)}, candidate {clip(cand_out.text, 60)}"
                ),
                {"schemas": rows},
            )
    return passed(PROBE, {"schemas": rows}, statistic=float(len(rows)))
