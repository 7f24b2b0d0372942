"""The code-confinement check (`fasttrack.kinds.scope_diff.confine`): changed files of
base...head against the manifest's code, allowed and gated paths; violations are listed by path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fasttrack.evidence import Status
from fasttrack.kinds.scope_diff.confine import confine, manifest_relpath

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.plan.instance import CheckInstance


def run(instance: CheckInstance, context: RunContext) -> Any:
    from fasttrack import gitutil
    from fasttrack.errors import UsageError

    m = context.manifest
    code_paths, allowed = list(m.model.code_paths), list(m.model.allowed_paths)
    source = getattr(context, "base_source", None)
    base_measure = {
        "code_paths": code_paths,
        "allowed_paths": allowed,
        "base": context.base,
        "head": context.head,
        "base_source": source,
    }
    if not context.base:
        why = source or (
            "no branch to default to (neither the CI's target branch, origin/HEAD, origin/main, "
            "origin/master, main nor master exists)"
        )
        return context.outcome(
            instance,
            Status.NOT_RUN,
            reason_code="no_base",
            measurements=base_measure,
            reason=f"no base commit to compare with: pass --base REF (e.g. --base origin/main); {why}",
        )
    try:
        changed = gitutil.changed_files(context.base, context.head or "HEAD", context.repo_root)
    except UsageError as err:
        return context.outcome(
            instance, Status.ERRORED, reason_code="error", reason=str(err), measurements=base_measure
        )
    result = confine(changed, code_paths, allowed, manifest_relpath(m), m.model.gated_paths)
    measurements = {
        **base_measure,
        "changed": list(result.changed),
        "violations": list(result.violations),
        "gated_paths": list(m.model.gated_paths),
        # shared files changed behind the switches: the reviewer reads them; stock_unchanged must pass
        "gated": list(result.gated),
    }
    if result.violations:
        paths = [v["path"] for v in result.violations]
        shown = ", ".join(paths[:10]) + (f" and {len(paths) - 10} more" if len(paths) > 10 else "")
        return context.outcome(
            instance,
            Status.FAILED,
            reason_code="outside_code_paths",
            measurements=measurements,
            reason=f"{len(paths)} changed file(s) outside model.code_paths/allowed_paths"
            + ("/gated_paths" if m.model.gated_paths else "")
            + f": {shown}",
        )
    return context.outcome(instance, Status.PASSED, measurements=measurements)
