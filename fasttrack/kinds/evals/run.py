"""The evals check at one scope point: open both sides, compare them on one lm-eval task
(`compare.run_eval_comparison`), return the CheckOutcome with every item's scores as an artifact."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.cachedir import cache_dir
from fasttrack.errors import TargetError
from fasttrack.evidence import ARM_SEPARATOR, Artifact, CheckOutcome, Status, utc_now
from fasttrack.kinds.context import target_failure
from fasttrack.kinds.evals import cache
from fasttrack.kinds.evals.compare import run_eval_comparison
from fasttrack.process.cpu import pin_single_thread
from fasttrack.targets.sides import OpenedSide, opened_pair

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.plan.instance import CheckInstance


IN_PROCESS_BATCH = 8  # requests per generate() call of an in-process target (one engine batch)


def request_concurrency(manifest: Any, spec: Any, sides: Sequence[Any]) -> int:
    """Requests in flight per side: for servers (sides with a ``url``), the eval's
    ``model_args.num_concurrent`` or the target's ``concurrency`` (default 64); in-process, one
    engine batch of `IN_PROCESS_BATCH`. fasttrack's server clients are told the same (and
    ``model_args.timeout``)."""
    model_args = _model_args(spec)
    if not sides or not all(getattr(side, "url", None) for side in sides):
        return IN_PROCESS_BATCH
    target_conf = getattr(manifest.target, str(manifest.target.kind), None)
    concurrency = int(model_args.get("num_concurrent") or getattr(target_conf, "concurrency", None) or 64)
    for side in sides:
        client = side.target
        if hasattr(client, "concurrency"):
            client.concurrency = concurrency
        if model_args.get("timeout") is not None and hasattr(client, "timeout_s"):
            client.timeout_s = float(model_args["timeout"])
    return concurrency


def _model_args(spec: Any) -> dict[str, Any]:
    raw = spec.get("model_args") if isinstance(spec, dict) else getattr(spec, "raw", {}).get("model_args")
    return dict(raw or {})


def side_models(spec: Any, sides: Sequence[OpenedSide], batch: int) -> tuple[list[Any], bool]:
    """The lm-eval ``LM`` of each side, and whether the sides can be asked at once: lm-eval's own
    client (``lm_eval_model``) where every side is a server, else fasttrack's adapter."""
    from fasttrack.kinds.evals import native
    from fasttrack.kinds.evals.compare import as_eval_config
    from fasttrack.targets.lm_adapter import TargetLM

    model = native.declared_model(as_eval_config(spec))
    if model is None or not all(side.url for side in sides):
        return [TargetLM(side.target, name=side.name, batch_size=batch) for side in sides], False
    clients = []
    for side in sides:
        url = str(side.url)
        served = getattr(side.target, "model", None) or native.served_model(url)
        clients.append(native.lm_eval_client(model, native.client_args(model, url, served, _model_args(spec), batch)))
    return clients, True


def run(instance: CheckInstance, context: RunContext) -> CheckOutcome:
    started, clock = utc_now(), time.monotonic()
    manifest = context.manifest
    point = instance.scope_point.as_dict() if instance.scope_point is not None else None
    # An ablation arm is named "<eval id>~<switch>": the same eval, another candidate (context.manifest).
    eval_id = instance.name.split(ARM_SEPARATOR, 1)[0]
    spec: Any = next((ev for ev in manifest.evals if ev.id == eval_id), None) or dict(instance.config or {})
    logs: list[Path] = []
    pin_single_thread(manifest, point)  # in-process CPU targets: 2 threads on a shared host ran 3-12x slower

    def outcome(status: str, extra_artifacts: Sequence[Artifact] = (), **fields_: Any) -> CheckOutcome:
        artifacts = [context.artifact(p, "log", f"{p.stem} log") for p in logs if p.exists()] + list(extra_artifacts)
        return context.outcome(
            instance,
            Status(status),
            started_at=started,
            duration_s=time.monotonic() - clock,
            artifacts=artifacts,
            **fields_,
        )

    try:
        with opened_pair(manifest, point, log_dir=context.artifact_dir) as (baseline, candidate):
            logs = [*baseline.logs, *candidate.logs]
            batch = request_concurrency(manifest, spec, [baseline, candidate])
            (base_lm, cand_lm), parallel = side_models(spec, [baseline, candidate], batch)
            result = run_eval_comparison(
                spec,
                base_lm,
                cand_lm,
                cache_dir=cache_dir(),
                root=Path(manifest.root),
                baseline_identity=cache.baseline_identity(manifest, point),
                no_cache=cache.no_cache(context),
                parallel=parallel,
            )
    except TargetError as exc:
        status, code = target_failure(exc)
        return outcome(status.value, reason_code=code, reason=str(exc))
    extra = []
    if result.items:  # every item's scores, for the reviewer and for re-analysis
        path = context.artifact_path("items.jsonl")
        path.write_text("".join(json.dumps(item) + "\n" for item in result.items), encoding="utf-8")
        extra.append(context.artifact(path, "jsonl", "per-item scores of both sides"))
    reason = result.reason
    limit = spec.get("limit") if isinstance(spec, dict) else getattr(spec, "limit", None)
    if result.reason_code == "underpowered" and limit is not None:
        # The manifest's limit, not the data, ran out: say how to decide without editing it.
        reason = f"{reason}; to decide, lift the limit of {limit}: --eval-limit {eval_id}=all"
    return outcome(
        result.status,
        reason_code=result.reason_code,
        reason=reason,
        measurements=result.to_measurements(),
        extra_artifacts=extra,
    )
