"""`fasttrack merge`: join the evidence of shards 1..N of one run into one evidence and verdict.

Every shard lists every instance; an instance another shard ran is recorded there as
not_run(out_of_scope). The merge takes, per instance, the outcome of the shard that ran it;
shards from different manifests or commits, or with different --only/--skip, are rejected."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Sequence

from fasttrack.errors import UsageError
from fasttrack.evidence import CheckOutcome, Evidence, RunRecord, read_evidence, utc_now, write_evidence


def _ran(outcome: CheckOutcome) -> bool:
    return not (outcome.reason_code == "out_of_scope" and outcome.required)


def merge_evidence(evidences: Sequence[Evidence]) -> Evidence:
    if not evidences:
        raise UsageError("fasttrack merge: give at least one evidence folder")
    first = evidences[0]
    for e in evidences[1:]:
        for what, a, b in (("manifest sha256", first.manifest.sha256, e.manifest.sha256), ("head commit", first.git.head, e.git.head),
                           ("--only", first.run.only, e.run.only), ("--skip", first.run.skip, e.run.skip)):
            if a != b:
                raise UsageError(f"fasttrack merge: shards differ in {what} ({a} vs {b}); they are not parts of one run")
    shards = [e.run.shard for e in evidences]
    counts = {s[1] for s in shards if s}
    if len(counts) > 1:
        raise UsageError(f"fasttrack merge: shards disagree on the shard count ({sorted(counts)})")
    indices = [s[0] for s in shards if s]
    if len(indices) != len(set(indices)):
        raise UsageError(f"fasttrack merge: shard {sorted(i for i in indices if indices.count(i) > 1)[0]} given twice")
    merged: dict[str, list[CheckOutcome]] = {}
    for e in evidences:
        groups: dict[str, list[CheckOutcome]] = {}
        for o in e.checks:
            groups.setdefault(o.id.split("#", 1)[0], []).append(o)
        for ident, outcomes in groups.items():
            if ident not in merged or (not all(_ran(o) for o in merged[ident]) and all(_ran(o) for o in outcomes)):
                merged[ident] = outcomes
    states = {e.run.state for e in evidences}
    state = "complete" if states == {"complete"} else ("interrupted" if "interrupted" in states else sorted(states - {"complete"})[0])
    run = RunRecord(f"merge-{'-'.join(e.run.id[:8] for e in evidences)}", min(e.run.started_at for e in evidences),
                    utc_now(), state, ("fasttrack", "merge"), None, first.run.only, first.run.skip)
    git = replace(first.git, dirty=any(e.git.dirty for e in evidences))
    base = replace(first, run=run, git=git)
    return base.with_checks([o for outcomes in merged.values() for o in outcomes])


def merge_dirs(dirs: Sequence[Path], out_dir: Path, render_reports: bool = True) -> tuple[Evidence, str]:
    from fasttrack.engine_summary import write_summary

    evidences = [read_evidence(Path(d)) for d in dirs]
    merged = merge_evidence(evidences)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_evidence(merged, out_dir / "evidence.json")
    _copy_artifacts(merged, dirs, out_dir)
    excluded = [k for k in dict.fromkeys(o.kind for o in merged.checks if o.reason_code == "out_of_scope" and not o.required)]
    summary = write_summary(merged, out_dir / "summary.txt", excluded)
    if render_reports:
        from fasttrack.engine import _render_reports
        from fasttrack.progress import Progress

        _render_reports(out_dir / "evidence.json", out_dir, Progress(0, 0))
    return merged, summary


def _copy_artifacts(evidence: Evidence, dirs: Sequence[Path], out_dir: Path) -> None:
    """Artifacts are referenced relative to the evidence folder: bring them along."""
    import shutil

    for o in evidence.checks:
        for a in o.artifacts:
            target = out_dir / a.path
            if target.exists():
                continue
            for d in dirs:
                source = Path(d) / a.path
                if source.exists() and source.resolve() != target.resolve():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source, target)
                    break
