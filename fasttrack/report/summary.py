"""The text summary of a run (summary.txt and the end of `fasttrack check`'s output): verdict,
what was excluded, counts, and the reasons grouped so that one missing capability is one line.
Everything comes from the evidence (what was excluded: ``run.only``/``skip``/``hardware``)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

from fasttrack.evidence import CheckOutcome, Evidence, Status
from fasttrack.selection import Selection, describe_eval_limits, describe_hardware_exclusions, hardware_exclusions

MAX_NAMED = 6
MISSING_CODES = ("hardware", "dependency", "target")


def summary_text(evidence: Evidence) -> str:
    v = evidence.verdict
    run = evidence.run
    excluded_kinds = Selection(run.only, run.skip).excluded_kinds(c.kind for c in evidence.checks)
    ran_kinds = list(dict.fromkeys(c.kind for c in evidence.checks if c.required))
    head = f"fasttrack {evidence.manifest.optimisation_id}: {v.status.value}"
    if excluded_kinds:
        head += f" for the selected kinds {', '.join(ran_kinds) or '(none)'}; excluded: {', '.join(excluded_kinds)}"
    hardware_left_out = hardware_exclusions(run.to_dict(), (c.to_dict() for c in evidence.checks))
    if run.hardware:
        head += f"{';' if excluded_kinds else ''} for hardware {', '.join(run.hardware)}"
        if hardware_left_out:
            head += f" (excluded hardware: {', '.join(hardware_left_out)})"
    if run.state != "complete":
        head += f" (run {run.state})"
    lines = [head]
    if excluded_kinds:
        lines.append(
            "  partial run: the excluded kinds are recorded as not_run(out_of_scope), not required; "
            "only a run of every kind is the gate's verdict"
        )
    if hardware_left_out:
        lines.append(
            f"  partial run: excluded by {Selection(hardware=run.hardware).describe_hardware()} (not_run(out_of_scope), "
            "not required here; run them on that hardware and `fasttrack merge` for the full-scope verdict):"
        )
        lines.extend(f"    {line}" for line in describe_hardware_exclusions(hardware_left_out))
    if run.eval_limits:
        declared = {str(ev.get("id")): ev.get("limit") for ev in (evidence.manifest.data or {}).get("evals") or ()}
        lines.append(
            "  eval sample sizes from the command line, not the manifest: "
            + describe_eval_limits(dict(run.eval_limits), declared)
        )
    if run.shard:
        lines.append(f"  shard {run.shard[0]}/{run.shard[1]}: merge all shards with `fasttrack merge` for the verdict")
    counts = v.counts
    lines.append("  required outcomes: " + ", ".join(f"{counts.get(s.value, 0)} {s.value}" for s in Status))
    git = evidence.git
    if git.head:
        lines.append(
            f"  code: head {git.head[:12]}"
            + (f", base {git.base[:12]}" if git.base else ", no base")
            + (f" ({git.base_source})" if git.base_source else "")
            + (" (work tree dirty)" if git.dirty else "")
        )
    missing = missing_capabilities(c for c in evidence.checks if c.required and c.status is Status.NOT_RUN)
    if missing:
        lines.append("missing on this machine (one line per capability):")
        lines.extend(f"  {m}" for m in missing)
    groups = group_reasons(
        c
        for c in evidence.checks
        if c.required and c.status is not Status.PASSED and c.reason_code not in MISSING_CODES
    )
    if groups:
        lines.append("reasons:")
        lines.extend(f"  {g}" for g in groups)
    elif not missing:
        lines.extend(f"  {r}" for r in v.reasons[:3])
    lines.extend(claim_lines(evidence.checks))
    return "\n".join(lines) + "\n"


def claim_lines(outcomes: Iterable[CheckOutcome]) -> list[str]:
    """The claims lint, one line per claim (flags and labels for the reviewer; not in the verdict
    unless a claim is malformed), and the benchmarks' judgement of claims they measured."""
    lint = [o for o in outcomes if o.kind == "claims" and (o.measurements or {}).get("lint")]
    judged = [o for o in outcomes if o.kind == "claims" and not (o.measurements or {}).get("lint")]
    if not lint and not judged:
        return []
    lines = ["claims (labels for the reviewer; not counted in the verdict):"]
    for o in lint:
        lines.append(f"  {o.measurements.get('assessment') or o.name}")
    for o in judged:
        status = str((o.measurements or {}).get("status") or o.status.value).replace("_", " ")
        lines.append(
            f"  claim {o.name!r} at {o.scope_point_id or 'global'}: {status}" + (f": {o.reason}" if o.reason else "")
        )
    return _collapse(lines)


def group_reasons(outcomes: Iterable[CheckOutcome]) -> list[str]:
    """One line per (status, kind, reason code, reason): 'FAILED kernels (test_failed) x12: ...'.
    Outcomes whose reasons differ only by scope point are grouped by reason code, naming points."""
    order = {Status.FAILED: 0, Status.ERRORED: 1, Status.NOT_RUN: 2}
    exact: dict[tuple, list[CheckOutcome]] = defaultdict(list)
    for o in outcomes:
        # Reasons that name their own scope point group together; the points are listed after.
        reason = (o.reason or "").replace(f" at {o.scope_point_id}", "")
        exact[(order.get(o.status, 3), o.status.value, o.kind, o.name, o.reason_code or "", reason)].append(o)
    lines = []
    # Uncovered points are named one by one (the reviewer needs to know which), other groups counted.
    for (_, status, kind, _name, code, reason), members in sorted(
        exact.items(), key=lambda kv: (kv[0][0], kv[0][2], -len(kv[1]))
    ):
        count = f" x{len(members)}" if len(members) > 1 else ""
        where = ""
        if len(members) > 1:
            points = [m.scope_point_id or m.id for m in members]
            where = f" [{', '.join(points[:MAX_NAMED])}{f' and {len(points) - MAX_NAMED} more' if len(points) > MAX_NAMED else ''}]"
        elif members[0].scope_point_id:
            where = f" [{members[0].scope_point_id}]"
        lines.append(f"{status.upper()} {kind}/{members[0].name} ({code}){count}: {reason}{where}")
    return _collapse(lines)


def _collapse(lines: list[str], limit: int = 40) -> list[str]:
    if len(lines) <= limit:
        return lines
    return lines[:limit] + [f"... and {len(lines) - limit} more groups (see evidence.json)"]


def missing_capabilities(outcomes: Iterable[CheckOutcome]) -> list[str]:
    """One line per missing capability (hardware/dependency reasons), with how many outcomes it blocks."""
    counter: Counter[str] = Counter(
        f"[{o.reason_code}] {o.reason or ''}" for o in outcomes if o.reason_code in MISSING_CODES
    )
    return [f"{reason} ({n} outcome{'s' if n > 1 else ''})" for reason, n in counter.most_common()]


def write_summary(evidence: Evidence, path: Path) -> str:
    text = summary_text(evidence)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text
