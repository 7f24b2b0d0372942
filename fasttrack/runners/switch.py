"""Switch and proof of path: with default settings the target must run the stock path only;
with the switch on it must run the optimised path at every exercised batch size. A candidate
whose optimised path never executed fails, whatever its accuracy would have been.

Proof comes from the in-process target's ``path_report()`` (``decode_steps_by_path`` or a flat
``{path: steps}``) for python targets, or from the server's Prometheus counter for openai
targets (``switch.proof``)."""

from __future__ import annotations

import re
from typing import Any, Mapping

from fasttrack.evidence import Status
from fasttrack.runners.cpu_threads import pin_single_thread

ISOLATION = "subprocess"  # the target runs in this process: the engine gives it a worker
MAX_PROOF_BATCH = 64
PROOF_TOKENS = 4


def expected_path(manifest: Any) -> str:
    proof = manifest.switch.proof
    return proof.value if proof is not None and proof.value else manifest.switch.name


def proof_batches(manifest: Any) -> list[int]:
    batch = manifest.scope.batch
    sizes = batch.representative() if batch is not None else (1,)
    return [b for b in sizes if b <= MAX_PROOF_BATCH] or [min(sizes)]


def path_counts(report: Mapping[str, Any]) -> dict[str, float]:
    counts = report.get("decode_steps_by_path", report)
    return {str(k): float(v) for k, v in counts.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def parse_metric(text: str, metric: str, label: str) -> dict[str, float]:
    """``metric{label="x"} 12`` lines of a Prometheus exposition -> {x: 12}."""
    pattern = re.compile(rf'^{re.escape(metric)}\{{([^}}]*)\}}\s+([0-9.eE+-]+)', re.M)
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
        requests = [{"prompt": f"proof of path, request {i}:", "max_tokens": PROOF_TOKENS, "temperature": 0.0, "seed": i}
                    for i in range(b)]
        target.generate(requests)
        after = path_counts(target.path_report())
        delta = {p: after.get(p, 0.0) - before.get(p, 0.0) for p in set(after) | set(before)}
        delta = {p: v for p, v in delta.items() if v}
        per_batch[b] = delta
        for p, v in delta.items():
            total[p] = total.get(p, 0.0) + v
    return total, per_batch


def run(instance: Any, context: Any) -> Any:
    from fasttrack.errors import TargetError
    from fasttrack.targets.python_target import TargetDependencyMissing, create_target

    m = context.manifest
    expected = expected_path(m)
    batches = proof_batches(m)
    point = instance.scope_point
    measurements: dict[str, Any] = {"expected_path": expected, "batches": batches, "source": m.target.kind}
    artifacts: list[Any] = []
    try:
        if m.target.kind == "openai":
            (default_counts, default_by_batch), (candidate_counts, candidate_by_batch) = (
                exercise_server(context, side, batches, artifacts, point.as_dict() if point is not None else None)
                for side in ("baseline", "candidate"))
        else:
            pin_single_thread(m, point.as_dict() if point is not None else None)
            stock = create_target(m, switch_on=None, scope_point=point)
            default_counts, default_by_batch = exercise(stock, batches)
            _close(stock)
            candidate = create_target(m, switch_on=True, scope_point=point)
            candidate_counts, candidate_by_batch = exercise(candidate, batches)
            _close(candidate)
    except TargetDependencyMissing as err:
        return context.outcome(instance, Status.NOT_RUN, reason_code="dependency", reason=str(err), measurements=measurements)
    except TargetError as err:
        return context.outcome(instance, Status.ERRORED, reason_code="target", reason=str(err), measurements=measurements,
                               artifacts=artifacts)
    measurements.update(default_path_counts=default_counts, candidate_path_counts=candidate_counts,
                        default_by_batch={str(b): c for b, c in default_by_batch.items()},
                        candidate_by_batch={str(b): c for b, c in candidate_by_batch.items()})
    if default_counts.get(expected, 0) > 0:
        on_at = [b for b, c in default_by_batch.items() if c.get(expected, 0) > 0]
        return context.outcome(instance, Status.FAILED, reason_code="switch_default_on", measurements=measurements, artifacts=artifacts,
                               reason=f"with default settings the optimised path {expected!r} ran "
                                      f"{default_counts[expected]:g} decode steps (batch {', '.join(map(str, on_at))}): "
                                      f"the {m.switch.name} switch must be off by default")
    if not default_counts:
        return context.outcome(instance, Status.ERRORED, reason_code="path_not_exercised", measurements=measurements,
                               artifacts=artifacts, reason="the target reported no decode steps with default settings: its path report proves nothing")
    missing = [b for b, c in candidate_by_batch.items() if c.get(expected, 0) <= 0]
    if missing:
        seen = ", ".join(f"{p}: {v:g}" for p, v in sorted(candidate_counts.items())) or "none"
        return context.outcome(instance, Status.FAILED, reason_code="path_not_exercised", measurements=measurements,
                               artifacts=artifacts, reason=f"with {m.switch.name} on, the optimised path {expected!r} never ran at batch "
                                      f"{', '.join(map(str, missing))} (decode steps by path: {seen})")
    return context.outcome(instance, Status.PASSED, measurements=measurements, artifacts=artifacts)


def exercise_server(context: Any, side: str, batches: list[int], artifacts: list[Any],
                    point: dict[str, Any] | None = None) -> tuple[dict[str, float], dict[int, dict[str, float]]]:
    """Start (or reach) one side's server and read the proof counter around each batch.
    The baseline side is the server with default settings, the candidate the one with the flag."""
    import httpx

    from fasttrack.errors import TargetError
    from fasttrack.targets.openai_server import ManagedServer, OpenAITarget, ServerSpec

    m = context.manifest
    openai = m.target.openai
    conf = getattr(openai, side)
    proof = m.switch.proof
    if proof is None or proof.source != "metrics" or not proof.metric:
        raise TargetError("switch.proof must name a metrics counter (source: metrics, metric, label) for an openai target")
    from fasttrack.probes.sides import server_command

    # the scope point's {tensor_parallel} etc. filled in, as for the probes' servers
    spec = ServerSpec(side, command=tuple(server_command(m, side, point, None)) if conf.command else None, url=conf.url,
                      health_path=openai.health_path, startup_timeout_s=openai.startup_timeout_s,
                      env=dict(conf.env), cwd=str(m.resolve_path(conf.cwd)) if conf.cwd else str(m.root))
    server = ManagedServer(spec, context.artifact_dir)
    try:
        base_url = server.start()

        class _Scraped:
            def __init__(self) -> None:
                self.client = OpenAITarget(base_url, model=openai.model_name, concurrency=8, server=server)

            def generate(self, requests: list[dict[str, Any]]) -> Any:
                return self.client.generate(requests)

            def path_report(self) -> dict[str, float]:
                try:
                    text = httpx.get(base_url + proof.metrics_path, timeout=30).text
                except httpx.HTTPError as err:
                    raise TargetError(f"{side}: cannot read {base_url}{proof.metrics_path}: {err}") from err
                return parse_metric(text, proof.metric, proof.label or "path")

        return exercise(_Scraped(), batches)
    finally:
        server.stop()
        if server.log_path.exists():
            artifacts.append(context.artifact(server.log_path, "log", f"{side} server log"))


def _close(target: Any) -> None:
    close = getattr(target, "close", None)
    if callable(close):
        close()
