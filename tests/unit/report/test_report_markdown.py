"""The Markdown summary: GitHub-flavoured tables that parse, ≤ 1 MiB, appended to the step summary."""

from __future__ import annotations

from markdown_it import MarkdownIt

from fasttrack.kinds.registry import KINDS
from fasttrack.report.markdown import MAX_BYTES, cell, render_markdown, truncate, write_markdown


def gfm(text: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(text)


def test_summary_renders_as_gfm_tables(load):
    evidence, digest = load("fail")
    md = render_markdown(evidence, digest, report_link="report.html", kinds=KINDS)
    html = gfm(md)
    assert html.count("<table>") == 5  # kinds, coverage, problems, evals, claims
    assert "fasttrack: FAIL" in md and digest in md
    problem_rows = [line for line in md.splitlines() if line.startswith("| failed |")]
    assert len(problem_rows) == evidence["verdict"]["counts"]["failed"]


def test_hostile_text_cannot_break_a_table_or_inject_html(load):
    evidence, digest = load("fail")
    evidence["checks"][0]["reason"] = "a | b\nnew line <script>alert(1)</script>"
    md = render_markdown(evidence, digest, kinds=KINDS)
    html = gfm(md)
    assert "<script>" not in html
    row = next(line for line in md.splitlines() if "scope_diff/confinement" in line and line.startswith("| failed"))
    assert row.count(" | ") == 2, "the pipe in the reason is escaped, the row keeps three cells"
    assert cell("x|y") == "x\\|y"


def test_truncated_to_one_mebibyte_with_a_note():
    text = "\n".join(f"| row {i} | {'x' * 100} |" for i in range(20_000))
    out = truncate(text)
    assert len(out.encode()) <= MAX_BYTES
    assert out.rstrip().endswith("the HTML report has everything.")
    assert truncate("short") == "short"


def test_huge_evidence_summary_stays_under_the_limit(load):
    evidence, digest = load("fail")
    evidence["verdict"]["reasons"] = ["r" * 5000] * 500
    for c in evidence["checks"]:
        c["reason"] = "y" * 20_000
        c["status"] = "failed"
    md = render_markdown(evidence, digest, kinds=KINDS)
    assert len(md.encode()) <= MAX_BYTES


def test_step_summary_is_appended(load, tmp_path, monkeypatch):
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    evidence, digest = load("pass")
    md = render_markdown(evidence, digest, kinds=KINDS)
    written = write_markdown(md, tmp_path / "summary.md")
    assert written == [tmp_path / "summary.md", summary]
    assert summary.read_text().startswith("earlier step\n")
    assert "fasttrack: PASS" in summary.read_text()
    assert (tmp_path / "summary.md").read_text() == md
