"""`fasttrack verify EVIDENCE ...`: exit 0 when the evidence verifies and says PASS; 3 when it is
intact and consistent but does not decide (its verdict is INCOMPLETE, or it covers only part of
the scope); 1 when its verdict is FAIL or the evidence is broken (edited, unattested, for another
manifest, commit or hardware, a verdict that does not follow, an artifact replaced); 2 for
unusable input. Without --manifest it says loudly that it trusts the evidence's own manifest copy,
and in CI mode (``CI=true``) that alone fails it (exit 1)."""

from __future__ import annotations

import os
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
@click.option(
    "--policy-from",
    "policy_from",
    metavar="REF",
    help="Hold the manifest to the gate's policy at this git ref (the PR's base): a PR that loosens it fails.",
)
@click.option("--accept-policy-change", is_flag=True, help="A reviewer accepted the PR's change to the policy.")
def verify(
    evidence: Path,
    manifest: Path | None,
    head: str | None,
    allowed_signers: Path | None,
    hardware_from_manifest: bool,
    allow_partial: bool,
    policy_from: str | None,
    accept_policy_change: bool,
) -> int:
    """Check EVIDENCE's digest, signature, manifest, head commit, hardware scope, that the run
    covered the whole scope, and the verdict."""
    from fasttrack.errors import EXIT_PASS
    from fasttrack.kinds.registry import KINDS
    from fasttrack.report.reasons import first_screen
    from fasttrack.verification.verify import UNTRUSTED_COPY, VerifyOptions
    from fasttrack.verification.verify import verify as run_verify

    ci = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")
    options = VerifyOptions(
        evidence,
        manifest,
        head,
        allowed_signers,
        hardware_from_manifest,
        allow_partial,
        require_manifest=ci,
        policy_from=policy_from,
        accept_policy_change=accept_policy_change,
    )
    if manifest is None:
        click.echo(f"WARNING: {UNTRUSTED_COPY}; give --manifest (the base branch's file) to check it", err=True)
    result = run_verify(options, KINDS)
    data = result.evidence  # read once, by verify
    status = str(data["verdict"]["status"])
    for f in result.findings:
        click.echo(f"{_label(f.ok, f.name, status)} {f.name}: {f.message}")
        if f.name == "verdict" and not f.ok:
            # the grouped reasons `check` prints, not the raw ones
            for line in first_screen(data, KINDS).lines()[1:]:
                click.echo(f"     {line}")
    if result.ok:
        click.echo("verified")
        return EXIT_PASS
    code = exit_code(status, [f.name for f in result.failures])
    click.echo(
        f"not verified{' (incomplete)' if code == 3 else ''}: " + "; ".join(f.message for f in result.failures),
        err=True,
    )
    return code


def _label(ok: bool, name: str, status: str) -> str:
    """ok / FAIL, and INCOMPLETE for what does not decide: an INCOMPLETE verdict, a partial run."""
    if ok:
        return "ok  "
    if name in UNDECIDED and status != "FAIL":
        return "INCOMPLETE"
    return "FAIL"


# Findings that say "intact, but it does not decide": the verdict itself, and a partial run.
UNDECIDED = frozenset({"verdict", "whole-scope"})


def exit_code(status: str, failed: list[str]) -> int:
    """1 for a FAIL verdict or any other failed finding (broken or mismatched evidence: fail
    closed, including findings added later); 3 when only the verdict (INCOMPLETE) or the
    whole-scope rule failed on intact, consistent evidence."""
    from fasttrack.errors import EXIT_FAIL, EXIT_INCOMPLETE

    if status == "FAIL" or any(name not in UNDECIDED for name in failed):
        return EXIT_FAIL
    return EXIT_INCOMPLETE
