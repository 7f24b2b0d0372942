"""Preserved-feature probes (full context, temperature sampling, structured output, stop strings,
n > 1, returned logprobs), one check instance per feature and hardware setup.

The instance's ``name`` is the feature; its ``config`` holds the manifest's settings for it. Both
sides are opened from the manifest's target at the instance's scope point, the probe in
``fasttrack.probes`` runs, and its `ProbeResult` becomes the outcome (measurements: ``probe``,
``statistic``, ``p_value``, ``details``).
"""

from __future__ import annotations

import importlib
import time
from typing import TYPE_CHECKING, Any

from jsonschema.exceptions import SchemaError

from fasttrack.errors import TargetError
from fasttrack.evidence import CheckOutcome, Status, utc_now
from fasttrack.kinds.context import target_failure
from fasttrack.manifest.sections import Divergence
from fasttrack.probes import PROBES
from fasttrack.probes.base import (
    CapabilityMissing,
    ProbeResult,
    TargetContractError,
    TargetFailure,
    TargetUnreachable,
)
from fasttrack.probes.sides import probe_pair
from fasttrack.process.cpu import pin_single_thread

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.manifest import Manifest
    from fasttrack.plan.instance import CheckInstance

_STATUS = {"passed": Status.PASSED, "failed": Status.FAILED, "not_run": Status.NOT_RUN, "errored": Status.ERRORED}


def probe_settings(name: str, config: dict[str, Any], manifest: Manifest, dtype: str | None = None) -> Any:
    """The probe's settings object from the manifest's feature config (and related sections); a
    probe that compares distributions takes the divergence thresholds at the point's ``dtype``."""
    module_name, _, class_name = PROBES[name]
    cls = getattr(importlib.import_module(module_name), class_name)
    values = {k: v for k, v in config.items() if k not in ("name", "enabled", "required", "timeout_s")}
    if name == "full_context":
        context = manifest.scope.context
        return cls.from_mapping(
            values,
            divergence=(manifest.divergence or Divergence()).at_dtype(dtype),
            dtypes=max(1, len(manifest.scope.dtypes)) if dtype is not None else 1,
            dtype=dtype,
            max_context=context.max_tokens if context else None,
            context_buckets=context.buckets if context else (),
        )
    if name == "token_coverage":
        return cls.from_mapping(values, divergence=manifest.divergence)
    if name == "structured_output":
        return cls.from_mapping(values, resolve=manifest.resolve_path)
    return cls.from_mapping(values)


def run_probe(name: str, baseline: Any, candidate: Any, settings: Any) -> ProbeResult:
    module_name, function_name, _ = PROBES[name]
    return getattr(importlib.import_module(module_name), function_name)(baseline, candidate, settings)


def run(instance: CheckInstance, context: RunContext) -> CheckOutcome:
    started, clock = utc_now(), time.monotonic()
    name = (instance.config or {}).get("name", instance.name)

    def outcome(status: Status, **fields: Any) -> CheckOutcome:
        return context.outcome(instance, status, started_at=started, duration_s=time.monotonic() - clock, **fields)

    if name not in PROBES:
        return outcome(
            Status.ERRORED, reason_code="error", reason=f"no probe for feature {name!r}; known: {', '.join(PROBES)}"
        )
    try:
        point = instance.scope_point.as_dict() if instance.scope_point is not None else None
        settings = probe_settings(name, dict(instance.config or {}), context.manifest, (point or {}).get("dtype"))
        pin_single_thread(context.manifest, point)
        with probe_pair(context.manifest, point, log_dir=context.artifact_dir) as (baseline, candidate):
            result = run_probe(name, baseline, candidate, settings)
    except TargetError as exc:
        status, code = target_failure(exc)
        return outcome(status, reason_code=code, reason=str(exc), measurements={"probe": name})
    except CapabilityMissing as exc:  # the target lacks what the probe needs (e.g. a server without /tokenize)
        return outcome(
            Status.NOT_RUN,
            reason_code="dependency",
            reason=f"the target cannot be probed: {exc}",
            measurements={"probe": name},
        )
    except TargetContractError as exc:  # an answer fasttrack cannot read: no probe verdict on it
        return outcome(
            Status.ERRORED,
            reason_code="target",
            reason=f"cannot read the target's answer: {exc}",
            measurements={"probe": name},
        )
    except TargetUnreachable as exc:  # a dropped or truncated answer is the transport's, not the probe's
        return outcome(
            Status.ERRORED,
            reason_code="target",
            reason=f"the target could not be reached: {exc}",
            measurements={"probe": name},
        )
    except TargetFailure as exc:
        return outcome(
            Status.ERRORED,
            reason_code="target",
            reason=f"the target failed outside the probed request: {exc}",
            measurements={"probe": name},
        )
    except (OSError, ValueError, SchemaError) as exc:  # unreadable or broken schema file, bad settings
        return outcome(
            Status.ERRORED, reason_code="error", reason=f"{type(exc).__name__}: {exc}", measurements={"probe": name}
        )
    return outcome(
        _STATUS[result.status],
        reason_code=result.reason_code,
        reason=result.reason,
        measurements={
            "probe": result.probe,
            "statistic": result.statistic,
            "p_value": result.p_value,
            "details": dict(result.details),
        },
    )
