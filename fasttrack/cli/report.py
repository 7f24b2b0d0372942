"""`fasttrack report EVIDENCE [--html F] [--md F] [--junit F]`: render reports from evidence."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.argument("evidence", type=click.Path(path_type=Path))
@click.option(
    "--html", "html", type=click.Path(dir_okay=False, path_type=Path), help="Write the self-contained HTML report here."
)
@click.option(
    "--md", "markdown", type=click.Path(dir_okay=False, path_type=Path), help="Write the Markdown summary here."
)
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), help="Write JUnit XML here.")
@click.option("--no-annotate", is_flag=True, help="Do not emit GitHub/Buildkite annotations even under CI.")
def report(evidence: Path, html: Path | None, markdown: Path | None, junit: Path | None, no_annotate: bool) -> int:
    """Render EVIDENCE (evidence.json or its directory). Without options, writes report.html,
    summary.md and junit.xml beside it. Exits 0; the verdict is not the exit code here."""
    from fasttrack.fileio import require_writable
    from fasttrack.kinds.registry import KINDS
    from fasttrack.report.render import render_reports

    if html is None and markdown is None and junit is None:
        base = evidence if evidence.is_dir() else evidence.parent
        html, markdown, junit = base / "report.html", base / "summary.md", base / "junit.xml"
    for option, path in (("--html", html), ("--md", markdown), ("--junit", junit)):
        if path is not None and evidence.exists():  # a missing evidence is reported as such, no folder made
            require_writable(path.parent, f"{option} {path}: its folder")
    done = render_reports(
        evidence, kinds=KINDS, html=html, markdown=markdown, junit=junit, annotate=not no_annotate, echo=click.echo
    )
    for path in (done.html, done.markdown, done.junit):
        if path is not None:
            click.echo(f"wrote {path}", err=True)
    click.echo(f"verdict: {done.verdict}", err=True)
    return 0
