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
@click.option(
    "--manifest",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The manifest every part must be for (the base branch's file); without it each part is "
    "re-planned from its own manifest copy, which its writer controls.",
)
@click.option(
    "--allowed-signers",
    type=click.Path(dir_okay=False, path_type=Path),
    help="ssh allowed_signers file; every part's attestation must be signed by one of them.",
)
@click.option(
    "--policy-from",
    "policy_from",
    metavar="REF",
    help="Re-derive each part against its manifest held to the gate's policy at this git ref (as check did).",
)
@click.option("--accept-policy-change", is_flag=True, help="A reviewer accepted the PR's change to the policy.")
def merge(
    dirs: tuple[Path, ...],
    out_dir: Path,
    no_reports: bool,
    hardware: tuple[str, ...],
    manifest: Path | None,
    allowed_signers: Path | None,
    policy_from: str | None,
    accept_policy_change: bool,
) -> int:
    """Join the evidence of parts of one run (folders or evidence.json files): shards, or runs on
    different hardware (--hardware). Every part must verify first (digest, signature with
    --allowed-signers, statuses from measurements, plan coverage, artifacts); one that does not is
    refused by name (exit 1). Exit code: 0 PASS, 1 FAIL or a part that does not verify, 3
    INCOMPLETE (e.g. a shard or a declared accelerator is missing), 2 bad input."""
    from fasttrack.cli.options import parse_hardware
    from fasttrack.cli.outputs import write_outputs
    from fasttrack.engine.merge import merge_dirs
    from fasttrack.engine.run import VERDICT_EXIT
    from fasttrack.fileio import require_writable
    from fasttrack.kinds.registry import KINDS
    from fasttrack.outlock import lock_out, release_out
    from fasttrack.verification.parts import PartChecks

    folders = [d.parent if d.is_file() else d for d in dirs]
    require_writable(out_dir, "--out")
    lock_out(out_dir)
    checks = PartChecks(KINDS, manifest, allowed_signers, policy_from, accept_policy_change)
    try:
        evidence = merge_dirs(folders, out_dir, hardware=parse_hardware(hardware), kinds=KINDS, checks=checks)
        rendered = write_outputs(evidence, out_dir / "evidence.json", out_dir, reports=not no_reports, kinds=KINDS)
    finally:
        release_out(out_dir)
    click.echo(rendered.summary, nl=False)
    click.echo(f"evidence: {out_dir / 'evidence.json'}")
    return VERDICT_EXIT[evidence.verdict.status]
