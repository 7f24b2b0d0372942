"""Switch and proof of path: with default settings the target must run the stock path only;
with the switch on it must run the optimised path at every exercised batch size. A candidate
whose optimised path never executed fails, whatever its accuracy would have been.

Proof comes from the in-process target's ``path_report()`` (``decode_steps_by_path`` or a flat
``{path: steps}``) for python targets, or from the server's Prometheus counter for openai
targets (``switch.proof``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fasttrack.errors import TargetError
from fasttrack.evidence import Artifact, CheckOutcome, Status
from fasttrack.runners.cpu_threads import pin_single_thread
from fasttrack.targets.sides import OpenedSide, Side, TargetDependencyMissing, open_side

if TYPE_CHECKING:
    from fasttrack.instance import CheckInstance
    from fasttrack.manifest import Manifest
    from fasttrack.runners.context import RunContext

MAX_PROOF_BATCH = 64
PROOF_TOKENS = 4


def expected_path(manifest: Manifest) -> str:
    proof = manifest.switch.proof
    return proof.value if proof is not None and proof.value else manifest.switch.name


def proof_batches(manifest: Manifest) -> list[int]:
    batch = manifest.scope.batch
    sizes = batch.representative() if batch is not None else (1,)
    return [b for b in sizes if b <= MAX_PROOF_BATCH] or [min(sizes)]


def path_counts(report: Mapping[str, Any]) -> dict[str, float]:
    counts = report.get("decode_steps_by_path", report)
    return {str(k): float(v) for k, v in counts.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def parse_metric(text: str, metric: str, label: str) -> dict[str, float]:
    """``metric{label="x"} 12`` lines of a Prometheus exposition -> {x: 12}."""
    pattern = re.compile(rf"^{re.escape(metric)}\{{([^}}]*)\}}\s+([0-9.eE+-]+)", re.M)
    counts: dict[str, float] = {}
    for labels, value in pattern.findall(text):
        found = re.search(rf'{re.escape(label)}="([^"]*)"', labels)
        if found:
            counts[found.group(1)] = counts.get(found.group(1), 0.0) + float(value)
    return counts


def exercise(target: Any, batches: list[int]) -> tuple[dict[str, float], dict[int, dict[str, float]]]:
    """Run one short greedy batch per size; the decode steps per path, in total and per batch."""
    total: dict[str, float] = {}
    per_batch: dict[int, dict[str, float]] = {}
    for b in batches:
        before = path_counts(target.path_report())
        requests = [
            {"prompt": f"proof of path, request {i}:", "max_tokens": PROOF_TOKENS, "temperature": 0.0, "seed": i}
            for i in range(b)
        ]
        target.generate(requests)
        after = path_counts(target.path_report())
        delta = {p: after.get(p, 0.0) - before.get(p, 0.0) for p in set(after) | set(before)}
        delta = {p: v for p, v in delta.items() if v}
        per_batch[b] = delta
        for p, v in delta.items():
            total[p] = total.get(p, 0.0) + v
    return total, per_batch


def run(instance: CheckInstance, context: RunContext) -> CheckOutcome:
    m = context.manifest
    expected = expected_path(m)
    batches = proof_batches(m)
    point = instance.scope_point.as_dict() if instance.scope_point is not None else None
    measurements: dict[str, Any] = {"expected_path": expected, "batches": batches, "source": m.target.kind}
    artifacts: list[Artifact] = []
    if m.target.kind != "openai":
        pin_single_thread(m, point)
    try:
        # The baseline is the target with default settings: the switch must be off unless set.
        default_counts, default_by_batch = exercise_side(context, "baseline", batches, point, artifacts)
        candidate_counts, candidate_by_batch = exercise_side(context, "candidate", batches, point, artifacts)
    except TargetDependencyMissing as err:
        return context.outcome(
            instance, Status.NOT_RUN, reason_code="dependency", reason=str(err), measurements=measurements
        )
    except TargetError as err:
        return context.outcome(
            instance,
            Status.ERRORED,
            reason_code="target",
            reason=str(err),
            measurements=measurements,
            artifacts=artifacts,
        )
    measurements.update(
        default_path_counts=default_counts,
        candidate_path_counts=candidate_counts,
        default_by_batch={str(b): c for b, c in default_by_batch.items()},
        candidate_by_batch={str(b): c for b, c in candidate_by_batch.items()},
    )
    if default_counts.get(expected, 0) > 0:
        on_at = [b for b, c in default_by_batch.items() if c.get(expected, 0) > 0]
        return context.outcome(
            instance,
            Status.FAILED,
            reason_code="switch_default_on",
            measurements=measurements,
            artifacts=artifacts,
            reason=f"with default settings the optimised path {expected!r} ran "
            f"{default_counts[expected]:g} decode steps (batch {', '.join(map(str, on_at))}): "
            f"the {m.switch.name} switch must be off by default",
        )
    if not default_counts:
        return context.outcome(
            instance,
            Status.ERRORED,
            reason_code="path_not_exercised",
            measurements=measurements,
            artifacts=artifacts,
            reason="the target reported no decode steps with default settings: its path report proves nothing",
        )
    missing = [b for b, c in candidate_by_batch.items() if c.get(expected, 0) <= 0]
    if missing:
        seen = ", ".join(f"{p}: {v:g}" for p, v in sorted(candidate_counts.items())) or "none"
        return context.outcome(
            instance,
            Status.FAILED,
            reason_code="path_not_exercised",
            measurements=measurements,
            artifacts=artifacts,
            reason=f"with {m.switch.name} on, the optimised path {expected!r} never ran at batch "
            f"{', '.join(map(str, missing))} (decode steps by path: {seen})",
        )
    return context.outcome(instance, Status.PASSED, measurements=measurements, artifacts=artifacts)


def exercise_side(
    context: RunContext, side: Side, batches: list[int], point: Mapping[str, Any] | None, artifacts: list[Artifact]
) -> tuple[dict[str, float], dict[int, dict[str, float]]]:
    """Open one side (the baseline at the target's own default switch setting) and count its
    decode steps per path around each batch: from ``path_report()`` in-process, from the proof
    counter on ``/metrics`` for a server."""
    m = context.manifest
    proof = m.switch.proof
    if m.target.kind == "openai" and (proof is None or proof.source != "metrics" or not proof.metric):
        raise TargetError(
            "switch.proof must name a metrics counter (source: metrics, metric, label) for an openai target"
        )
    opened = open_side(m, side, point, log_dir=context.artifact_dir, switch_default=True)
    try:
        target: Any = opened.target if opened.kind == "python" else _MetricsScraper(opened, proof)
        return exercise(target, batches)
    finally:
        opened.close()
        for log in opened.logs:
            if log.exists():
                artifacts.append(context.artifact(log, "log", f"{side} server log"))


class _MetricsScraper:
    """A server side as the proof needs it: generate, and the proof counter as a path report."""

    def __init__(self, opened: OpenedSide, proof: Any) -> None:
        self.opened, self.proof = opened, proof

    def generate(self, requests: list[dict[str, Any]]) -> Any:
        return self.opened.target.generate(requests)

    def path_report(self) -> dict[str, float]:
        import httpx

        url = f"{self.opened.url}{self.proof.metrics_path}"
        try:
            text = httpx.get(url, timeout=30).text
        except httpx.HTTPError as err:
            raise TargetError(f"{self.opened.name}: cannot read {url}: {err}") from err
        return parse_metric(text, self.proof.metric, self.proof.label or "path")
