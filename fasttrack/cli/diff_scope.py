"""`fasttrack diff-scope MANIFEST --base REF`: only the code-confinement check, for pre-merge."""

from __future__ import annotations

import click


@click.command("diff-scope")
@click.argument("manifest", type=click.Path(dir_okay=False, path_type=str))
@click.option("--base", default=None, metavar="REF", help="Base commit (default: merge-base with origin/main if it exists).")
@click.option("--head", default=None, metavar="REF", help="Head commit (default: HEAD).")
def diff_scope(manifest: str, base: str | None, head: str | None) -> int:
    """Check that every file changed in BASE...HEAD is the model's own code, an allowed path or
    the manifest. Exit code: 0 confined, 1 violations (listed), 2 bad input or no base."""
    from fasttrack.runners.scope_diff import check_confinement

    report = check_confinement(manifest, base, head)
    click.echo(report.text)
    return report.exit_code
