"""Why an instance cannot run here: the hardware its scope point needs, or a target this machine
cannot open. (A missing Python module or program is the planner's own check: `Planner.make`.)"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fasttrack.environment import Environment
from fasttrack.manifest import Manifest, ScopePoint
from fasttrack.manifest.sections import HardwareEntry

if TYPE_CHECKING:
    from fasttrack.targets.protocol import TargetKind


@dataclass(frozen=True)
class Blocker:
    code: str
    reason: str
    needs: str


def is_cpu(point: ScopePoint) -> bool:
    return str(point.get("accelerator", "")).strip().lower() == "cpu"


def hardware_blocker(manifest: Manifest, env: Environment, point: ScopePoint) -> Blocker | None:
    accelerator = point.get("accelerator")
    if accelerator is None or is_cpu(point):
        return None
    entry = manifest.hardware_entry_for(point)
    needed = point.get("device_count") or point.get("tensor_parallel") or 1
    where = f"scope hardware entry {entry.index + 1}" if entry else "the scope"
    have = env.count_of(accelerator)
    if have < needed:
        link = _link_text(entry) if needed > 1 else ""
        return Blocker(
            "hardware",
            f"needs {accelerator} x{needed}{link} ({where}); this machine has: {env.describe()}",
            f"{accelerator} x{needed}",
        )
    if entry is not None and entry.compute_capability:
        found = env.capabilities_of(accelerator)
        if found != {entry.compute_capability}:
            seen = ", ".join(sorted(found)) or "unknown (no GPU query answered)"
            return Blocker(
                "hardware",
                f"needs {accelerator} with compute capability {entry.compute_capability} "
                f"(sm_{entry.compute_capability.replace('.', '')}, {where}); this machine's are: {seen}",
                f"{accelerator} sm_{entry.compute_capability.replace('.', '')}",
            )
    if needed > 1 and entry is not None and entry.interconnect == "nvlink" and env.interconnect != "nvlink":
        return Blocker(
            "hardware",
            f"needs {needed} {accelerator} GPUs linked by NVLink ({where}); this machine's GPUs are linked by {env.interconnect}",
            f"{accelerator} x{needed} over nvlink",
        )
    return None


def target_blocker(manifest: Manifest, targets: Mapping[str, TargetKind]) -> Blocker | None:
    """What keeps this machine from opening the manifest's target (for the kinds that drive it),
    as its kind of ``targets`` says."""
    kind = targets.get(manifest.target.kind)
    found = kind.unavailable(manifest) if kind is not None else None
    return None if found is None else Blocker("target", found.reason, found.needs)


def _link_text(entry: HardwareEntry | None) -> str:
    if entry is None or not entry.interconnect or entry.interconnect in ("none", "loopback"):
        return ""
    text = f" over {entry.interconnect}"
    if entry.nvlink_domain == "single":
        text += " in one NVLink domain"
    return text
