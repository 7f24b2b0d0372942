"""The example's manifest cut to its TP 1 CPU points, for acceptance tests that plant one fault."""

from __future__ import annotations

from typing import Any


def cpu_tp1_switches(manifest: dict[str, Any]) -> None:
    """Keep the switches that act at TP 1 on the CPU (those without ``points``) and only their
    census rules for the CPU: rules about an accelerator the cut scope lacks are invalid there."""
    manifest["switches"] = [s for s in manifest.get("switches") or () if not s.get("points")]
    for switch in manifest["switches"]:
        proof = switch.get("proof") or {}
        if "census" in proof:
            proof["census"] = [r for r in proof["census"] if (r.get("points") or {}).get("accelerator") == ["cpu"]]
