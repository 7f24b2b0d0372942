"""`fasttrack dashboard EVIDENCE_OR_DIR... -o SITE/`: a static site of verdicts over time."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("dashboard")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "-o", "--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Site directory to write."
)
def dashboard(inputs: tuple[Path, ...], out: Path) -> int:
    """Collect evidence files (directories are searched for evidence.json) and write SITE/index.html
    plus one report per run."""
    from fasttrack.fileio import require_writable
    from fasttrack.kinds.registry import KINDS
    from fasttrack.report.dashboard import build_site

    require_writable(out, "--out")
    site = build_site(list(inputs), out, KINDS)
    click.echo(f"wrote {site.index} ({site.optimisations} optimisations, {site.runs} runs)", err=True)
    return 0
