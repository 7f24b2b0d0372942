"""A GitHub-flavoured Markdown summary (for $GITHUB_STEP_SUMMARY and PR comments), ≤ 1 MiB."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.fileio import atomic_write
from fasttrack.report.coverage import END_TO_END, KERNEL, build_coverage
from fasttrack.report.reasons import first_screen
from fasttrack.report.sections import of_kind
from fasttrack.report.view import kinds_table, partial_run_notes

if TYPE_CHECKING:
    from fasttrack.report.sections import Kinds

MAX_BYTES = 1024 * 1024  # GitHub rejects step summaries over 1 MiB
MAX_PROBLEM_ROWS = 50  # failed and errored outcomes one by one; the reasons above group them
ICONS = {"PASS": "✅", "FAIL": "❌", "INCOMPLETE": "⚠️"}


def cell(text: Any) -> str:
    """Make a value safe inside a table cell: no pipes, no newlines, no raw HTML."""
    value = "" if text is None else str(text)
    value = value.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")
    value = value.replace("<", "&lt;").replace(">", "&gt;")
    return value if len(value) <= 300 else value[:299] + "…"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out


def render_markdown(evidence: Mapping[str, Any], digest: str, report_link: str | None = None, *, kinds: Kinds) -> str:
    """The first screen (verdict, reason groups worst first, next command: fasttrack.report.reasons)
    and, folded below it, the tables: outcomes per kind, the coverage of the declared scope, each
    kind's results (evals), what failed or errored, each kind's notes (claims)."""
    verdict = evidence["verdict"]
    m = evidence["manifest"]
    checks = list(evidence.get("checks", ()))
    screen = first_screen(evidence, kinds)
    lines = [
        f"## {ICONS.get(verdict['status'], '')} fasttrack: {verdict['status']} — {cell(m['title'])}",
        "",
        f"**{cell(screen.verdict)}**: {cell(screen.counts_text)} <sub>({cell(screen.sizes_text)})</sub>",
        "",
    ]
    lines += [f"- **arm `{cell(arm)}`: {cell(status)}** ({cell(why)})" for arm, status, why in screen.arms]
    lines += [f"- **{cell(g.title)}**: {cell(g.text)}" for g in screen.groups]
    if screen.more_groups:
        lines.append(f"- … and {screen.more_groups} more reason groups (see the HTML report)")
    if screen.groups or screen.arms:
        lines.append("")
    if screen.next is not None:
        lines += [f"**Next:** `{code(screen.next.command)}` — {cell(screen.next.why)}", ""]
    lines += [
        f"`{cell(m['optimisation_id'])}` · model `{cell(m['model_id'])}` · head `{cell(evidence['git'].get('head') or 'none')}`"
        f" · evidence sha256 `{digest}`" + (f" · full report: {cell(report_link)}" if report_link else ""),
        "",
        "<details><summary>Outcomes per check kind, coverage, evals, failures and claims</summary>",
        "",
    ]
    notes = partial_run_notes(evidence)
    lines += [f"> **{cell(note)}**" for note in notes] + ([""] if notes else [])
    lines += _table(
        ["kind", "passed", "failed", "errored", "not run", "not required"],
        [
            [r["kind"], r["passed"], r["failed"], r["errored"], r["not_run"], r["not_required"]]
            for r in kinds_table(checks)
        ],
    )
    lines += _coverage(evidence, kinds)
    lines += _kind_tables(evidence, checks, kinds, before_failures=True)
    lines += _failures(checks)
    lines += _kind_tables(evidence, checks, kinds, before_failures=False)
    lines += [
        "",
        "Not-run outcomes, one by one: the HTML report's All outcomes, or evidence.json.",
        "",
        "</details>",
        "",
    ]
    lines += [f"<sub>fasttrack {cell(evidence['tool']['version'])} · run {cell(evidence['run']['id'])}</sub>", ""]
    return truncate("\n".join(lines))


def _kind_tables(
    evidence: Mapping[str, Any], checks: list[Mapping[str, Any]], kinds: Kinds, *, before_failures: bool
) -> list[str]:
    """The tables each kind adds to summary.md (its results above the failures, its notes below)."""
    lines: list[str] = []
    for name, kind in kinds.items():
        section = kind.report
        if section is None or section.markdown is None or section.markdown_before_failures != before_failures:
            continue
        for title, header, rows in section.markdown(evidence, of_kind(checks, name)):
            lines += ["", f"### {title}", ""]
            lines += _table(header, rows)
    return lines


def _coverage(evidence: Mapping[str, Any], kinds: Kinds) -> list[str]:
    """The coverage map, per dimension: the declared values run end to end, only in kernel tests,
    or by no outcome that ran; the flagged axes above it (fasttrack.report.coverage)."""
    coverage = build_coverage(evidence, kinds)
    if coverage is None or not coverage.columns:
        return []
    lines = ["", "### Coverage of the declared scope", ""]
    lines += [f"- ⚠️ {cell(flag)}" for flag in coverage.flags] or [
        "Every declared scope value was exercised end to end."
    ]
    lines.append("")
    rows = []
    for group in coverage.groups:
        reach = {key: [r.value for r in group.rows if r.reach == key] for key in (END_TO_END, KERNEL, "none")}
        rows.append([group.dimension, *(", ".join(values) or "–" for values in reach.values())])
    lines += _table(["dimension", "end to end", "kernel tests only", "not reached"], rows)
    lines += ["", "Only outcomes that ran (passed or failed) count; not-run and errored ones exercised nothing."]
    return lines


def _failures(checks: list[Mapping[str, Any]]) -> list[str]:
    problems = [c for c in checks if c["status"] in ("failed", "errored") and c.get("required", True)]
    if not problems:
        return []
    lines = ["", f"### Failed and errored ({len(problems)})", ""]
    lines += _table(
        ["status", "check", "reason"],
        [
            [
                c["status"],
                c["id"],
                f"({c.get('reason_code')}) {c.get('reason') or ''}" if c.get("reason_code") else c.get("reason") or "",
            ]
            for c in problems[:MAX_PROBLEM_ROWS]
        ],
    )
    if len(problems) > MAX_PROBLEM_ROWS:
        lines.append(f"\n… and {len(problems) - MAX_PROBLEM_ROWS} more (see the HTML report).")
    return lines


def code(text: str) -> str:
    """Text inside an inline code span: no backticks or newlines to break out of it."""
    return " ".join(str(text).replace("`", "'").split())


def truncate(text: str, limit: int = MAX_BYTES) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    note = "\n\n> **Summary truncated** at 1 MiB; the HTML report has everything.\n"
    cut = data[: limit - len(note.encode("utf-8"))].decode("utf-8", errors="ignore")
    return cut[: cut.rfind("\n") + 1] + note


def write_markdown(text: str, path: Path | None) -> list[Path]:
    """Write to ``path`` and append to $GITHUB_STEP_SUMMARY when set. Returns what was written."""
    written = []
    if path is not None:
        atomic_write(Path(path), text.encode("utf-8"))
        written.append(Path(path))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
        written.append(Path(summary))
    return written
