"""The text summary of a run (summary.txt and the end of `fasttrack check`'s output): the
verdict, the reason groups worst first and the next command (fasttrack.report.reasons, shared
with summary.md and the HTML report), then what was excluded and the commits. Everything comes
from the evidence (what was excluded: ``run.only``/``skip``/``hardware``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fasttrack.evidence import Evidence
from fasttrack.report.reasons import first_screen
from fasttrack.selection import Selection, describe_eval_limits, describe_hardware_exclusions, hardware_exclusions

if TYPE_CHECKING:
    from fasttrack.report.sections import Kinds


def summary_text(evidence: Evidence, kinds: Kinds) -> str:
    """The verdict, one line per reason group (worst first), the next command; then what a
    partial run left out, where eval sizes came from, and the commits. The first lines are the
    reports' first screen (fasttrack.report.reasons), so terminal, summary.md and HTML agree."""
    v = evidence.verdict
    run = evidence.run
    screen = first_screen(evidence.to_dict(), kinds)
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
    lines = [head, f"  {screen.counts_text}", f"  ({screen.sizes_text})"]
    lines.extend(f"  arm {arm}: {status}" + (f" ({why})" if why else "") for arm, status, why in screen.arms)
    lines.extend(f"  {g.line()}" for g in screen.groups)
    if screen.more_groups:
        lines.append(f"  ... and {screen.more_groups} more reason groups (see report.html or evidence.json)")
    if screen.next is not None:
        lines.append(f"next: {screen.next.command}")
        lines.append(f"  ({screen.next.why})")
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
    git = evidence.git
    if git.head:
        lines.append(
            f"  code: head {git.head[:12]}"
            + (f", base {git.base[:12]}" if git.base else ", no base")
            + (f" ({git.base_source})" if git.base_source else "")
            + (" (work tree dirty)" if git.dirty else "")
        )
    for name, kind in kinds.items():  # what each kind adds for the reviewer (claims' labels)
        section = kind.report
        if section is not None and section.summary is not None:
            lines.extend(_collapse(section.summary([c for c in evidence.checks if c.kind == name])))
    return "\n".join(lines) + "\n"


def _collapse(lines: list[str], limit: int = 40) -> list[str]:
    if len(lines) <= limit:
        return lines
    return lines[:limit] + [f"... and {len(lines) - limit} more groups (see evidence.json)"]


def write_summary(evidence: Evidence, path: Path, kinds: Kinds) -> str:
    text = summary_text(evidence, kinds)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text
