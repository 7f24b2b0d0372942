"""`fasttrack attest EVIDENCE [--sign-key K]`: digest sidecar and in-toto Statement, optionally signed."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("attest")
@click.argument("evidence", type=click.Path(path_type=Path))
@click.option(
    "--sign-key",
    type=click.Path(dir_okay=False, path_type=Path),
    help="SSH private key: sign the Statement with `ssh-keygen -Y sign -n fasttrack`.",
)
def attest(evidence: Path, sign_key: Path | None) -> int:
    """Write EVIDENCE.sha256 and the in-toto attestation beside EVIDENCE."""
    from fasttrack.attest import attest as run_attest

    paths = run_attest(evidence, sign_key)
    click.echo(f"wrote {paths.sidecar}")
    click.echo(f"wrote {paths.statement}")
    if sign_key is not None:
        click.echo(f"wrote {paths.signature}")
    return 0
