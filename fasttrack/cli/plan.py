"""`fasttrack plan MANIFEST [--json] [--all]`: which check instances can run on this machine."""

from __future__ import annotations

import click


@click.command("plan")
@click.argument("manifest", type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print the full plan as JSON.")
@click.option("--all", "show_all", is_flag=True, help="List every instance instead of grouping scope points.")
@click.option(
    "--costs-from",
    type=click.Path(dir_okay=False, path_type=str),
    help="An earlier run's evidence.json: estimate from what it measured. Without it the plan uses what "
    "the last runs of this optimisation on this machine measured (kept in the cache), else built-in guesses.",
)
def plan(manifest: str, as_json: bool, show_all: bool, costs_from: str | None) -> int:
    """Expand MANIFEST's scope against this machine: every check instance per scope point,
    runnable here or the exact reason why not, with a rough cost estimate."""
    import json
    from dataclasses import replace
    from pathlib import Path

    from fasttrack.environment import detect_environment
    from fasttrack.kinds.registry import KINDS
    from fasttrack.manifest import load_manifest
    from fasttrack.plan import build_plan, render_plan_table
    from fasttrack.plan.render import format_seconds
    from fasttrack.targets.dependencies import with_dependencies

    loaded = load_manifest(manifest)
    here = with_dependencies(detect_environment(accelerators=True, root=loaded.root), loaded)
    result = build_plan(loaded, here, KINDS)
    from fasttrack.plan.remembered import measured_costs

    measured, whose = measured_costs(Path(costs_from) if costs_from else None, loaded.id, here.to_dict())
    if measured is not None:
        result = replace(result, instances=tuple(measured.calibrate(result.instances)))
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, sort_keys=False, default=str))
    else:
        click.echo(render_plan_table(result, group=not show_all))
        if measured is not None:
            runnable = [i for i in result.instances if i.runnable]
            known = sum(1 for i in runnable if measured.knows(i))
            click.echo(
                f"estimated wall time from {whose}: "
                f"{format_seconds(measured.wall_seconds(result.instances))} ({known} of {len(runnable)} runnable "
                f"instances measured, the rest guessed; its sharing and parallelism: "
                f"wall = {measured.wall_factor:.2f} x the instances' seconds)"
            )
    return 0
