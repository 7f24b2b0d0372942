"""`fasttrack plan MANIFEST [--json] [--all]`: which check instances can run on this machine."""

from __future__ import annotations

import click


@click.command("plan")
@click.argument("manifest", type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print the full plan as JSON.")
@click.option("--all", "show_all", is_flag=True, help="List every instance instead of grouping scope points.")
def plan(manifest: str, as_json: bool, show_all: bool) -> int:
    """Expand MANIFEST's scope against this machine: every check instance per scope point,
    runnable here or the exact reason why not, with a rough cost estimate."""
    import json

    from fasttrack.environment import detect_environment
    from fasttrack.kinds.registry import KINDS
    from fasttrack.manifest import load_manifest
    from fasttrack.plan import build_plan, render_plan_table

    loaded = load_manifest(manifest)
    result = build_plan(loaded, detect_environment(accelerators=True, root=loaded.root), KINDS)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, sort_keys=False, default=str))
    else:
        click.echo(render_plan_table(result, group=not show_all))
    return 0
