"""Which of the manifest's environment switches a side runs with: the candidate's on, the
baseline's (and an ablation arm's other switches) removed, so that the gate's own environment
never turns a baseline's switch on. Both target kinds apply it (in-process around the factory and
every call, a server in its environment)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest
    from fasttrack.targets.protocol import Side


def switch_environment(manifest: Manifest, side: Side) -> tuple[dict[str, str], tuple[str, ...]]:
    """(variables to set, variables to remove) for one side: every environment switch that side
    runs with on is set to its value, every other one removed (the gate's own environment must
    not turn the baseline's switch on)."""
    set_: dict[str, str] = {}
    unset: list[str] = []
    for switch in manifest.switches:
        if switch.env_name is None:
            continue
        if manifest.switch_on(switch, side):
            set_[switch.env_name] = switch.env_value or ""
        else:
            unset.append(switch.env_name)
    return set_, tuple(unset)
