"""`fasttrack verify EVIDENCE ...`: exit 0 when the evidence verifies and says PASS, else 1."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("verify")
@click.argument("evidence", type=click.Path(path_type=Path))
@click.option(
    "--manifest", type=click.Path(dir_okay=False, path_type=Path), help="The manifest the evidence must be for."
)
@click.option("--head", help="The commit the evidence must be for (full sha or a prefix of 7+).")
@click.option(
    "--allowed-signers",
    type=click.Path(dir_okay=False, path_type=Path),
    help="ssh allowed_signers file; the attestation must be signed by one of them.",
)
@click.option(
    "--hardware-from-manifest",
    is_flag=True,
    help="Judge the recorded hardware against --manifest's scope instead of the copy in the evidence.",
)
@click.option(
    "--allow-partial",
    is_flag=True,
    help="Accept evidence of a run narrowed by --only/--skip/--hardware (by default its PASS does not verify).",
)
def verify(
    evidence: Path,
    manifest: Path | None,
    head: str | None,
    allowed_signers: Path | None,
    hardware_from_manifest: bool,
    allow_partial: bool,
) -> int:
    """Check EVIDENCE's digest, signature, manifest, head commit, hardware scope, that the run
    covered the whole scope, and the verdict."""
    from fasttrack.errors import EXIT_FAIL, EXIT_PASS
    from fasttrack.verify import VerifyOptions
    from fasttrack.verify import verify as run_verify

    result = run_verify(VerifyOptions(evidence, manifest, head, allowed_signers, hardware_from_manifest, allow_partial))
    for f in result.findings:
        click.echo(f"{'ok  ' if f.ok else 'FAIL'} {f.name}: {f.message}")
    if result.ok:
        click.echo("verified")
        return EXIT_PASS
    click.echo("not verified: " + "; ".join(f.message for f in result.failures), err=True)
    return EXIT_FAIL
