"""`fasttrack merge DIR... --out DIR`: join shards into one evidence and one verdict."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("merge")
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out", "out_dir", default="fasttrack-out", show_default=True, type=click.Path(file_okay=False, path_type=Path)
)
@click.option("--no-reports", is_flag=True, help="Write evidence.json and summary.txt only.")
@click.option(
    "--hardware",
    multiple=True,
    metavar="ACCEL",
    help="Judge only these accelerators' scope points (default: every declared one; "
    "a scope point no merged run covered is then INCOMPLETE).",
)
def merge(dirs: tuple[Path, ...], out_dir: Path, no_reports: bool, hardware: tuple[str, ...]) -> int:
    """Join the evidence of parts of one run (folders or evidence.json files): shards, or runs on
    different hardware (--hardware). Exit code: 0 PASS, 1 FAIL, 3 INCOMPLETE (e.g. a shard or a
    declared accelerator is missing), 2 bad input."""
    from fasttrack.cli.options import parse_hardware
    from fasttrack.cli.outputs import write_outputs
    from fasttrack.engine.merge import merge_dirs
    from fasttrack.engine.run import VERDICT_EXIT
    from fasttrack.fileio import require_writable
    from fasttrack.kinds.registry import KINDS

    folders = [d.parent if d.is_file() else d for d in dirs]
    require_writable(out_dir, "--out")
    evidence = merge_dirs(folders, out_dir, hardware=parse_hardware(hardware), kinds=KINDS)
    rendered = write_outputs(evidence, out_dir / "evidence.json", out_dir, reports=not no_reports, kinds=KINDS)
    click.echo(rendered.summary, nl=False)
    click.echo(f"evidence: {out_dir / 'evidence.json'}")
    return VERDICT_EXIT[evidence.verdict.status]
