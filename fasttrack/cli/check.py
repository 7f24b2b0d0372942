"""`fasttrack check MANIFEST`: run the gate and write evidence, summary and reports."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command("check")
@click.argument("manifest", type=click.Path(dir_okay=False, path_type=str))
@click.option(
    "--base",
    default=None,
    metavar="REF",
    help="Base commit for code confinement (default: the merge-base of HEAD with the CI's "
    "target branch, origin/HEAD, origin/main, origin/master, main or master, the first that exists).",
)
@click.option("--head", default=None, metavar="REF", help="Head commit (default: HEAD).")
@click.option(
    "--out",
    "out_dir",
    default="fasttrack-out",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for evidence.json, summary.txt, reports and artifacts.",
)
@click.option(
    "--only",
    multiple=True,
    metavar="KINDS",
    help="Run only these check kinds (comma separated; e.g. scope,kernels,stress). "
    "Other kinds are recorded as excluded and not counted: the verdict covers the selected kinds only.",
)
@click.option("--skip", multiple=True, metavar="KINDS", help="Do not run these check kinds (recorded as excluded).")
@click.option(
    "--hardware",
    multiple=True,
    metavar="ACCEL",
    help="Run only the scope points of this accelerator as the manifest names it "
    "(repeatable; e.g. cpu, 'NVIDIA H200'; 'here': the declared ones this machine has). Other hardware is recorded "
    "as excluded and not counted; `fasttrack merge` with the other machines' runs gives the full-scope verdict.",
)
@click.option(
    "--eval-limit",
    "eval_limit",
    multiple=True,
    metavar="ID=N|all",
    help="Evaluate at most N items of eval ID "
    "(all: its whole data set) instead of the manifest's limit (repeatable). For a deciding run on a bigger "
    "machine; recorded in the evidence and named in the summary.",
)
@click.option(
    "--jobs",
    "jobs",
    default="1",
    show_default=True,
    metavar="N|auto",
    help="Run up to N checks of the target at CPU points side by side (switch, evals, divergence, feature "
    "probes, speculative; one core each); benchmarks, stress, kernel tests, sanitizer and anything on an "
    "accelerator run alone. auto: one per core.",
)
@click.option(
    "--resume", is_flag=True, help="Reuse passed/failed outcomes of the evidence in --out whose inputs are unchanged."
)
@click.option("--shard", default=None, metavar="K/N", help="Run shard K of N (join with `fasttrack merge`).")
@click.option(
    "--no-cache", is_flag=True, help="Reuse nothing: neither earlier outcomes (--resume) nor the eval baseline cache."
)
@click.option(
    "--timeout-scale",
    default=1.0,
    type=float,
    show_default=True,
    help="Multiply every check's timeout (slow machines).",
)
@click.option(
    "--previous",
    "previous",
    default=None,
    type=click.Path(path_type=Path),
    metavar="EVIDENCE",
    help="Compare each speed-up and eval mean with this earlier run of the same optimisation (evidence.json or "
    "its folder): a drop beyond both runs' intervals is an outcome '#previous', failed where the manifest says "
    "regression: fail.",
)
@click.option(
    "--costs-from",
    "costs_from",
    default=None,
    type=click.Path(path_type=Path),
    metavar="EVIDENCE",
    help="An earlier run's evidence.json: the progress ETA starts from what it measured (per instance, per "
    "kind, and its overlap) instead of the plan's built-in guesses.",
)
@click.option(
    "--policy-from",
    "policy_from",
    default=None,
    metavar="REF",
    help="Take the gate's policy (code/allowed/gated paths, scope, margins, alphas, required checks) from the "
    "manifest at this git ref (the PR's base branch, e.g. origin/main): a PR that loosens it fails, judged by "
    "the base's rules, unless --accept-policy-change.",
)
@click.option(
    "--accept-policy-change",
    is_flag=True,
    help="A reviewer accepted the PR's change to the policy: run by the PR's rules (the change stays on record).",
)
@click.option("--no-reports", is_flag=True, help="Write evidence.json and summary.txt only.")
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
def check(
    manifest: str,
    base: str | None,
    head: str | None,
    out_dir: Path,
    only: tuple[str, ...],
    skip: tuple[str, ...],
    hardware: tuple[str, ...],
    eval_limit: tuple[str, ...],
    jobs: str,
    resume: bool,
    shard: str | None,
    no_cache: bool,
    timeout_scale: float,
    previous: Path | None,
    costs_from: Path | None,
    policy_from: str | None,
    accept_policy_change: bool,
    no_reports: bool,
    quiet: bool,
) -> int:
    """Run every check of MANIFEST that this machine can run; record the rest with the reason.
    Exit code: 0 PASS, 1 FAIL, 3 INCOMPLETE, 130 interrupted, 2 bad input."""
    from fasttrack.cli.options import parse_eval_limits, parse_hardware, parse_jobs, parse_kinds, parse_shard
    from fasttrack.cli.outputs import write_outputs
    from fasttrack.engine.run import CheckOptions, run_check
    from fasttrack.errors import UsageError
    from fasttrack.kinds.registry import KINDS
    from fasttrack.outlock import release_out
    from fasttrack.selection import Selection

    if resume and no_cache:
        raise UsageError("--resume and --no-cache contradict each other")
    selection = Selection(
        parse_kinds(only, "--only", KINDS),
        parse_kinds(skip, "--skip", KINDS),
        parse_shard(shard),
        parse_hardware(hardware),
    )
    options = CheckOptions(
        manifest=manifest,
        out_dir=out_dir,
        base=base,
        head=head,
        selection=selection,
        resume=resume and not no_cache,
        no_cache=no_cache,
        timeout_scale=timeout_scale,
        argv=("fasttrack", *sys.argv[1:]),  # never the machine's path to the script
        quiet=quiet,
        eval_limits=parse_eval_limits(eval_limit),
        jobs=parse_jobs(jobs),
        previous=previous,
        costs_from=costs_from,
        policy_from=policy_from,
        accept_policy_change=accept_policy_change,
        keep_out_lock=True,  # released below, once the reports are written too
    )
    try:
        result = run_check(options, KINDS)
        rendered = write_outputs(result.evidence, result.evidence_path, out_dir, reports=not no_reports, kinds=KINDS)
    finally:
        release_out(out_dir)
    click.echo(rendered.summary, nl=False)
    click.echo(f"evidence: {result.evidence_path}")
    if rendered.paths:
        click.echo("reports: " + ", ".join(str(p) for p in rendered.paths))
    return result.exit_code
