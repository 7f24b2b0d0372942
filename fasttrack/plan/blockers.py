"""Why an instance cannot run here: the hardware its scope point needs, or a target this machine
cannot open. (A missing Python module or program is the planner's own check: `Planner.make`.)"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fasttrack.environment import Environment
from fasttrack.manifest import Manifest, ScopePoint
from fasttrack.manifest.sections import HardwareEntry
from fasttrack.targets.dependencies import requirement, unmet

if TYPE_CHECKING:
    from fasttrack.targets.protocol import TargetKind


# Interconnects a multi-GPU point must have here when its entry names them.
_LINKS = {"nvlink": "NVLink", "xgmi": "xGMI"}


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
    if entry is not None:
        found = architecture_blocker(entry, env, str(accelerator), where)
        if found is not None:
            return found
    wanted = (entry.interconnect if entry is not None else None) or ""
    if needed > 1 and wanted in _LINKS and env.interconnect != wanted:
        return Blocker(
            "hardware",
            f"needs {needed} {accelerator} GPUs linked by {_LINKS[wanted]} ({where}); this machine's GPUs are linked by {env.interconnect}",
            f"{accelerator} x{needed} over {wanted}",
        )
    return None


def architecture_blocker(entry: HardwareEntry, env: Environment, accelerator: str, where: str) -> Blocker | None:
    """The architecture an entry asks of its GPUs, against what this machine's report: a CUDA
    compute capability (exactly, or at least) or an AMD gfx target. A GPU that reports none
    (no query answered) meets no requirement."""
    if entry.compute_capability or entry.min_compute_capability:
        found = env.capabilities_of(accelerator)
        wanted = entry.compute_capability or f">= {entry.min_compute_capability}"
        sm = f"sm_{(entry.compute_capability or entry.min_compute_capability or '').replace('.', '')}"
        if entry.compute_capability:
            met = found == {entry.compute_capability}
        else:
            met = bool(found) and all(_version(c) >= _version(entry.min_compute_capability) for c in found)
        if not met:
            seen = ", ".join(sorted(found)) or "unknown (no GPU query answered)"
            return Blocker(
                "hardware",
                f"needs {accelerator} with compute capability {wanted} "
                f"({'' if entry.compute_capability else 'at least '}{sm}, {where}); this machine's are: {seen}",
                f"{accelerator} {'' if entry.compute_capability else '>= '}{sm}",
            )
    if entry.gfx_arch:
        archs = env.archs_of(accelerator)
        if archs != {entry.gfx_arch}:
            seen = ", ".join(sorted(archs)) or "unknown (neither ROCm's torch nor rocm-smi named one)"
            return Blocker(
                "hardware",
                f"needs {accelerator} of architecture {entry.gfx_arch} ({where}); this machine's are: {seen}",
                f"{accelerator} {entry.gfx_arch}",
            )
    return None


def _version(text: str | None) -> tuple[int, ...]:
    return tuple(int(part) for part in str(text).split(".") if part.isdigit())


def build_blocker(manifest: Manifest, env: Environment) -> Blocker | None:
    """The first dependency build (``target.dependencies``) that does not meet the manifest's
    requirement here: every check that runs code would run on a build it was not declared for."""
    for index, dep in enumerate(manifest.target.dependencies):
        why = unmet(dep, env.dependencies.get(dep.name))
        if why is not None:
            return Blocker(
                "dependency", f"needs {requirement(dep)} (target.dependencies[{index}]); {why}", requirement(dep)
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
