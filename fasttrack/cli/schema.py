"""`fasttrack schema [manifest|evidence]`: print a JSON Schema shipped with fasttrack."""

from __future__ import annotations

import click


@click.command("schema")
@click.argument("kind", required=False, default="manifest", type=click.Choice(["manifest", "evidence"]))
def schema(kind: str) -> int:
    """Print the JSON Schema of a manifest (default) or of evidence."""
    from fasttrack.resources import schema_path

    click.echo(schema_path(kind).read_text(encoding="utf-8"), nl=False)
    return 0
