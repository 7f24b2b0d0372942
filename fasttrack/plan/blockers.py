"""Why an instance cannot run here: the hardware its scope point needs, or a target this machine
cannot open. (A missing Python module or program is the planner's own check: `Planner.make`.)"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from fasttrack.environment import Environment
from fasttrack.manifest import Manifest, ScopePoint
from fasttrack.manifest.model import HardwareEntry


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


def target_blocker(manifest: Manifest) -> Blocker | None:
    """What keeps this machine from opening the manifest's target (for the kinds that drive it)."""
    target = manifest.target
    if target.kind == "python" and target.python is not None:
        module = target.python.factory.split(":", 1)[0]
        base = manifest.resolve_path(target.python.path) if target.python.path else manifest.root
        relative = Path(*module.split("."))
        if not (
            (base / relative).with_suffix(".py").exists()
            or (base / relative / "__init__.py").exists()
            or find_spec(module.split(".")[0]) is not None
        ):
            return Blocker(
                "target", f"the target factory module {module!r} is not under {base} and not installed", module
            )
        return None
    if target.kind == "openai" and target.openai is not None:
        for side in ("baseline", "candidate"):
            conf = getattr(target.openai, side)
            if conf.command and shutil.which(conf.command[0]) is None:
                return Blocker(
                    "target",
                    f"{conf.command[0]!r} (target.openai.{side}.command) is not installed here",
                    conf.command[0],
                )
    return None


def _link_text(entry: HardwareEntry | None) -> str:
    if entry is None or not entry.interconnect or entry.interconnect in ("none", "loopback"):
        return ""
    text = f" over {entry.interconnect}"
    if entry.nvlink_domain == "single":
        text += " in one NVLink domain"
    return text
