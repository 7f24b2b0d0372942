"""Measured costs remembered per optimisation and machine, so that `plan` and the progress ETA
start from what the last run here measured without being told where its evidence lies (#37: the
built-in per-kind guesses said ~22 minutes for the vLLM example's 3.5-minute run).

`check` remembers each finished run's costs (`MeasuredCosts`) under the cache directory, keyed by
the optimisation id and this machine's accelerator and count; a later run updates what it measured
and keeps the rest. The memory only feeds estimates: no outcome or verdict ever reads it, and an
unreadable file is ignored (and overwritten by the next run)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fasttrack.cachedir import cache_dir
from fasttrack.plan.costs import MeasuredCosts


def costs_path(optimisation_id: str, environment: Mapping[str, Any]) -> Path:
    machine = f"{environment.get('accelerator') or 'cpu'} x{environment.get('accelerator_count') or 1}"
    digest = hashlib.sha256(f"{optimisation_id}\0{machine}".encode()).hexdigest()[:16]
    return cache_dir() / "costs" / f"{digest}.json"


def recall(optimisation_id: str, environment: Mapping[str, Any]) -> MeasuredCosts | None:
    """What earlier runs of this optimisation on this kind of machine measured, or None."""
    try:
        data = json.loads(costs_path(optimisation_id, environment).read_text(encoding="utf-8"))
        return MeasuredCosts.from_dict(data["costs"])
    except (OSError, ValueError, TypeError, KeyError):
        return None


def remember(evidence: Mapping[str, Any]) -> Path | None:
    """Store a finished run's measured costs; None where it measured nothing or the cache cannot be
    written (a read-only home must not fail a check)."""
    optimisation_id = str((evidence.get("manifest") or {}).get("optimisation_id") or "")
    environment = evidence.get("environment") or {}
    measured = MeasuredCosts.from_evidence(evidence)
    if not optimisation_id or not measured.per_instance:
        return None
    earlier = recall(optimisation_id, environment)
    costs = earlier.updated_by(measured) if earlier is not None else measured
    path = costs_path(optimisation_id, environment)
    record = {"optimisation_id": optimisation_id, "finished_at": (evidence.get("run") or {}).get("finished_at")}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError:
        return None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({**record, "costs": costs.to_dict()}, out, sort_keys=True)
        os.replace(tmp, path)  # whole or not at all: two runs finishing at once leave one of them
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        return None
    return path


def measured_costs(
    costs_from: Path | None, optimisation_id: str, environment: Mapping[str, Any], *, memory: bool = True
) -> tuple[MeasuredCosts | None, str]:
    """The costs `plan` and the progress ETA start from, and whose they are: ``costs_from``'s
    run (an unreadable file is bad input, exit 2), else the memory of this optimisation on this
    machine (unless ``memory`` is off: ``--no-cache``), else none (the built-in guesses)."""
    if costs_from is not None:
        from fasttrack.evidence import read_evidence_dict

        given = MeasuredCosts.from_evidence(read_evidence_dict(costs_from))
        return given, f"run {given.source}'s measured costs"
    found = recall(optimisation_id, environment) if memory else None
    return found, f"the measured costs of this optimisation's last run here ({found.source})" if found else ""
