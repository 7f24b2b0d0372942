"""`fasttrack schema [manifest|evidence]`: print a JSON Schema shipped with fasttrack."""

from __future__ import annotations

import click


@click.command("schema")
@click.argument("kind", required=False, default="manifest", type=click.Choice(["manifest", "evidence"]))
def schema(kind: str) -> int:
    """Print the JSON Schema of a manifest (default) or of evidence."""
    from fasttrack.resources import evidence_schema, schema_path, schema_text

    if kind == "evidence":  # its kind enum: this fasttrack's check kinds
        from fasttrack.kinds.registry import KINDS

        click.echo(schema_text(evidence_schema(KINDS)), nl=False)
        return 0
    click.echo(schema_path(kind).read_text(encoding="utf-8"), nl=False)
    return 0
