"""`fasttrack validate FILE...`: schema and semantic validation of manifests."""

from __future__ import annotations

import click


@click.command("validate")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=str))
@click.option("-q", "--quiet", is_flag=True, help="Print only problems, not the 'ok' lines.")
def validate(files: tuple[str, ...], quiet: bool) -> int:
    """Validate manifest FILES; print every problem as file:line: $.path: message.

    Exit 0 when all are valid (warnings allowed), 2 when any is not.
    """
    from fasttrack.errors import EXIT_PASS, EXIT_USAGE, ManifestError
    from fasttrack.manifest import load_manifest

    status = EXIT_PASS
    for name in files:
        try:
            manifest = load_manifest(name)
        except ManifestError as err:
            status = EXIT_USAGE
            click.echo(f"invalid: {name} ({len(err.problems)} problem(s))")
            for line in err.problems:
                click.echo(f"  {line}")
            continue
        for warning in manifest.warnings:
            click.echo(f"  {warning}")
        if not quiet:
            count = manifest.scope_size()
            click.echo(f"ok: {name} ({count} scope point{'' if count == 1 else 's'})")
    return status
