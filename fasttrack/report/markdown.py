"""A GitHub-flavoured Markdown summary (for $GITHUB_STEP_SUMMARY and PR comments), ≤ 1 MiB."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fasttrack.fileio import atomic_write
from fasttrack.report.view import as_map, kinds_table, measurements, num, partial_run_notes, short_point, strings

MAX_BYTES = 1024 * 1024  # GitHub rejects step summaries over 1 MiB
MAX_PROBLEM_ROWS = 200
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


def render_markdown(evidence: Mapping[str, Any], digest: str, report_link: str | None = None) -> str:
    verdict = evidence["verdict"]
    m = evidence["manifest"]
    checks = list(evidence.get("checks", ()))
    lines = [
        f"## {ICONS.get(verdict['status'], '')} fasttrack: {verdict['status']} — {cell(m['title'])}",
        "",
        f"`{cell(m['optimisation_id'])}` · model `{cell(m['model_id'])}` · head `{cell(evidence['git'].get('head') or 'none')}`"
        f" · evidence sha256 `{digest}`",
        "",
    ]
    if report_link:
        lines += [f"Full report: {report_link}", ""]
    lines += [f"> **{cell(note)}**" for note in partial_run_notes(evidence)] + (
        [""] if partial_run_notes(evidence) else []
    )
    lines += [f"- {cell(r)}" for r in verdict.get("reasons", [])[:20]]
    if len(verdict.get("reasons", [])) > 20:
        lines.append(f"- … and {len(verdict['reasons']) - 20} more")
    lines += ["", "### Outcomes per check kind", ""]
    lines += _table(
        ["kind", "passed", "failed", "errored", "not run"],
        [[r["kind"], r["passed"], r["failed"], r["errored"], r["not_run"]] for r in kinds_table(checks)],
    )
    problems = [c for c in checks if c["status"] != "passed" and c.get("required", True)]
    if problems:
        lines += ["", f"### Problems ({len(problems)})", ""]
        lines += _table(
            ["status", "check", "reason"],
            [
                [
                    c["status"],
                    c["id"],
                    f"({c.get('reason_code')}) {c.get('reason') or ''}"
                    if c.get("reason_code")
                    else c.get("reason") or "",
                ]
                for c in problems[:MAX_PROBLEM_ROWS]
            ],
        )
        if len(problems) > MAX_PROBLEM_ROWS:
            lines.append(f"\n… and {len(problems) - MAX_PROBLEM_ROWS} more problems (see the HTML report).")
    evals = [c for c in checks if c["kind"] == "evals"]
    if evals:
        lines += ["", "### Evals (paired, candidate − baseline)", ""]
        rows = []
        for c in evals:
            me = measurements(c)
            flips = as_map(me.get("flips"))
            rows.append(
                [
                    me.get("task", c["name"]),
                    short_point(c.get("scope_point")),
                    c["status"],
                    num(me.get("n")),
                    num(me.get("diff"), signed=True),
                    f"[{num(me.get('ci_low'), signed=True)}, {num(me.get('ci_high'), signed=True)}]",
                    num(me.get("margin")),
                    f"{num(flips.get('right_to_wrong'))} / {num(flips.get('wrong_to_right'))}",
                ]
            )
        lines += _table(
            ["task", "scope point", "status", "n", "diff", "95% CI", "margin", "right→wrong / wrong→right"], rows
        )
    claims = [c for c in checks if c["kind"] == "claims"]
    if claims:
        lines += ["", "### Benchmark claims", ""]
        lines += _table(
            ["claim", "status", "labels"],
            [
                [
                    measurements(c).get("statement") or c["name"],
                    measurements(c).get("status") or c["status"],
                    ", ".join(strings(measurements(c).get("labels"))),
                ]
                for c in claims
            ],
        )
    lines += ["", f"<sub>fasttrack {cell(evidence['tool']['version'])} · run {cell(evidence['run']['id'])}</sub>", ""]
    return truncate("\n".join(lines))


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
