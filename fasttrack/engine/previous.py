"""``fasttrack check --previous EVIDENCE``: the run's speed-ups and eval means against an earlier
run of the same optimisation (`fasttrack.history`), as outcomes of this run.

Each value both runs measured becomes one outcome ``<outcome id>#previous`` of the same kind and
name: failed (``regression``) when it dropped beyond both runs' intervals, passed otherwise.
Required only where the manifest asks (``regression: fail`` on the benchmark or eval); the
default (``warn``) shows the drop without failing the run."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fasttrack import history
from fasttrack.errors import EvidenceError, UsageError
from fasttrack.evidence import CheckOutcome, Evidence, Status, read_evidence_dict, utc_now
from fasttrack.kinds.base import Kinds
from fasttrack.manifest import Manifest

SUFFIX = "#previous"


def load_earlier(path: Path, manifest: Manifest, kinds: Kinds) -> dict[str, Any]:
    """The earlier run's evidence, checked to be of the same optimisation (else a usage error)."""
    try:
        earlier = read_evidence_dict(Path(path), kinds=kinds)
    except (OSError, EvidenceError) as err:
        raise UsageError(f"--previous: cannot read {path}: {err}") from None
    other = history.optimisation_id(earlier)
    if other != manifest.id:
        raise UsageError(f"--previous: {path} is evidence of optimisation {other!r}, this run checks {manifest.id!r}")
    return earlier


def outcomes(
    evidence: Evidence, earlier: Mapping[str, Any], manifest: Manifest, source: str, kinds: Kinds
) -> list[CheckOutcome]:
    modes = {("benchmarks", b.id): b.regression for b in manifest.benchmarks}
    modes.update({("evals", e.id): e.regression for e in manifest.evals})
    found = []
    for compared in history.compare(evidence.to_dict(), earlier, kinds):
        now = compared.now
        fail = modes.get((now.kind, now.name), "warn") == "fail"
        found.append(
            CheckOutcome(
                id=f"{now.id}{SUFFIX}",
                kind=now.kind,
                name=now.name,
                status=Status.FAILED if compared.dropped else Status.PASSED,
                scope_point=dict(now.point) or None,
                scope_point_id=now.id.split("@", 1)[1] if "@" in now.id else None,
                required=fail,
                reason_code="regression" if compared.dropped else None,
                reason=f"against {source}: {compared.sentence()}" if compared.dropped else None,
                started_at=utc_now(),
                measurements={"against": source, "regression": "fail" if fail else "warn", **compared.to_dict()},
            )
        )
    return found
