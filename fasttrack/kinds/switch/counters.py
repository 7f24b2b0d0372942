"""Where the switches' decode steps are counted, and what the proof exercises: the path each
switch's steps are counted under, the counter (path-report section or server metric) that counts
them, the batch sizes the proof runs, and reading the counts. The proof's runner, its rule and the
benchmarks' census proof read them here."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fasttrack.manifest.sections import SERVER_KINDS

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest
    from fasttrack.manifest.sections import Switch

MAX_PROOF_BATCH = 64
DEFAULT_GROUP = "path"

Counts = dict[str, dict[str, float]]  # counter group -> path value -> decode steps


def expected_path(manifest: Manifest) -> str:
    return manifest.switch.path_value


def counter_group(switch: Switch, kind: str) -> str:
    """Where a switch's steps are counted: the path-report section (python) or the metric and
    label (a server: openai, vllm, sglang)."""
    proof = switch.proof
    if kind in SERVER_KINDS:
        return f"{proof.metric}{{{proof.label or 'path'}}}" if proof is not None and proof.metric else DEFAULT_GROUP
    return proof.label if proof is not None and proof.label else DEFAULT_GROUP


def proof_batches(manifest: Manifest) -> list[int]:
    batch = manifest.scope.batch
    sizes = batch.representative() if batch is not None else (1,)
    return [b for b in sizes if b <= MAX_PROOF_BATCH] or [min(sizes)]


def path_counts(report: Mapping[str, Any]) -> dict[str, float]:
    counts = report.get("decode_steps_by_path", report)
    return {str(k): float(v) for k, v in counts.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def report_groups(report: Mapping[str, Any], groups: Sequence[str]) -> Counts:
    """The counters of an in-process path report per group: ``decode_steps_by_<group>`` when the
    report has it, else the path counts (``decode_steps_by_path`` or flat)."""
    out: Counts = {}
    for group in groups:
        section = report.get(f"decode_steps_by_{group}")
        out[group] = path_counts(section if isinstance(section, Mapping) else report)
    return out


def parse_metric(text: str, metric: str, label: str) -> dict[str, float]:
    """``metric{label="x"} 12`` lines of a Prometheus exposition -> {x: 12}."""
    pattern = re.compile(rf"^{re.escape(metric)}\{{([^}}]*)\}}\s+([0-9.eE+-]+)", re.M)
    counts: dict[str, float] = {}
    for labels, value in pattern.findall(text):
        found = re.search(rf'{re.escape(label)}="([^"]*)"', labels)
        if found:
            counts[found.group(1)] = counts.get(found.group(1), 0.0) + float(value)
    return counts
