"""`fasttrack diff-scope MANIFEST --base REF`: only the code-confinement check, for pre-merge."""

from __future__ import annotations

import click


@click.command("diff-scope")
@click.argument("manifest", type=click.Path(dir_okay=False, path_type=str))
@click.option(
    "--base", default=None, metavar="REF", help="Base commit (default: merge-base with origin/main if it exists)."
)
@click.option("--head", default=None, metavar="REF", help="Head commit (default: HEAD).")
def diff_scope(manifest: str, base: str | None, head: str | None) -> int:
    """Check that every file changed in BASE...HEAD is the model's own code, an allowed path or
    the manifest. Exit code: 0 confined, 1 violations (listed), 2 bad input or no base."""
    from fasttrack.errors import EXIT_FAIL, EXIT_PASS
    from fasttrack.kinds.scope_diff.confine import confinement_of

    report = confinement_of(manifest, base, head)
    result = report.result
    where = f"{report.base[:12]}...{report.head[:12]} (base: {report.base_source})"
    if result.violations:
        click.echo(
            f"FAIL: {len(result.violations)} of {len(result.changed)} changed file(s) in {where} are outside "
            f"model.code_paths ({', '.join(report.code_paths)}) and model.allowed_paths:"
        )
        for v in result.violations:
            click.echo(f"  {v['path']}")
        return EXIT_FAIL
    click.echo(
        f"PASS: all {len(result.changed)} changed file(s) in {where} are inside the model's code paths, "
        "allowed paths" + (", gated paths" if result.gated else "") + " or the manifest"
    )
    if result.gated:
        click.echo("gated shared files changed (review them; the stock_unchanged check must pass):")
        for path in result.gated:
            click.echo(f"  {path}")
    return EXIT_PASS
