"""Command-line overrides of a loaded manifest, applied before planning.

Only the sample size of an evaluation can be overridden (``--eval-limit ID=N|all``): the
manifest declares what a check means (task, metric, margin, alpha, points), while how many
items a given machine can afford is the run's business. A CI job on 2 cores runs the
manifest's small limit (and reports not_run(underpowered) when it cannot decide); a deciding
run on the same manifest lifts it. The evidence records every override (run.eval_limits) and
the summary names it, so a reviewer sees that the run and the file differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from fasttrack.errors import UsageError
from fasttrack.manifest.model import Manifest
from fasttrack.manifest.sections import freeze, thaw


def with_eval_limits(manifest: Manifest, limits: Sequence[tuple[str, int | None]]) -> Manifest:
    """``manifest`` with each named eval's ``limit`` replaced (None: every item of its data)."""
    if not limits:
        return manifest
    declared = [ev.id for ev in manifest.evals]
    wanted = dict(limits)
    unknown = [eval_id for eval_id in wanted if eval_id not in declared]
    if unknown:
        known = ", ".join(declared) or "none"
        raise UsageError(f"--eval-limit: {manifest.path} declares no eval with id {unknown[0]!r} (declared: {known})")
    evals = []
    for ev in manifest.evals:
        if ev.id not in wanted:
            evals.append(ev)
            continue
        raw = thaw(ev.raw)
        raw["limit"] = wanted[ev.id]
        evals.append(replace(ev, limit=wanted[ev.id], raw=freeze(raw)))
    return replace(manifest, evals=tuple(evals))
