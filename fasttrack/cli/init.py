"""`fasttrack init [PATH] [--force]`: write a commented starter manifest."""

from __future__ import annotations

import click


@click.command("init")
@click.argument("path", required=False, default="fasttrack.yaml", type=click.Path(dir_okay=False, path_type=str))
@click.option("--force", is_flag=True, help="Overwrite PATH if it exists.")
def init(path: str, force: bool) -> int:
    """Write a commented starter manifest to PATH (default fasttrack.yaml)."""
    from pathlib import Path

    from fasttrack.errors import UsageError

    target = Path(path)
    if target.exists() and not force:
        raise UsageError(f"{path} already exists; pass --force to overwrite it")
    starter = (Path(__file__).resolve().parent.parent / "manifest" / "starter.yaml").read_text(encoding="utf-8")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(starter, encoding="utf-8")
    except OSError as err:
        raise UsageError(f"cannot write {path}: {err.strerror or err}") from None
    click.echo(f"wrote {path}; edit it, then run: fasttrack validate {path}")
    return 0
