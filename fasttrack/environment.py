"""What this machine is: accelerators, CPU, OS, software versions and git state.

Cheap by default: versions come from package metadata (no heavy imports) and git from tiny
subprocess calls. Accelerator detection imports torch (1-2 s) only when asked for it
(``detect_environment(accelerators=True)``, which ``fasttrack plan`` does); otherwise it asks
``nvidia-smi``, then ``rocm-smi`` (AMD GPUs, when torch has no ROCm), when present.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from fasttrack import rocm

PACKAGES = ("fasttrack", "torch", "lm-eval", "vllm", "jsonschema", "pytest", "xgrammar")
_GIT_TIMEOUT_S = 5
_SMI_TIMEOUT_S = 10


@dataclass(frozen=True)
class Accelerator:
    index: int
    name: str
    memory_bytes: int | None = None
    compute_capability: str | None = None  # CUDA "major.minor", e.g. "9.0" (H200), "10.3" (B300)
    arch: str | None = None  # AMD GPUs: the gfx target, e.g. "gfx942" (MI300X), "gfx950" (MI355X)


@dataclass(frozen=True)
class GitState:
    head: str | None = None
    branch: str | None = None
    dirty: bool | None = None


@dataclass(frozen=True)
class Environment:
    """This machine. ``accelerator`` is the GPU name (the first one's) or "cpu"."""

    accelerator: str
    accelerators: tuple[Accelerator, ...]
    accelerator_source: str  # "torch" | "nvidia-smi" | "rocm-smi" | "none" | "not probed"
    interconnect: str  # "nvlink", "xgmi", "pcie", "loopback" (cpu), "none" (one GPU) or "unknown"
    cpu_model: str
    cpu_count: int
    os: str
    python: str
    packages: dict[str, str | None] = field(default_factory=dict)  # distribution -> version
    cuda_driver: str | None = None
    git: GitState = field(default_factory=GitState)
    # The installed builds of the manifest's target.dependencies, by name: {version, commit, source}
    # (fasttrack.targets.dependencies); the evidence records them apart (``dependencies``).
    dependencies: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def accelerator_count(self) -> int:
        return len(self.accelerators)

    @property
    def has_gpu(self) -> bool:
        return bool(self.accelerators)

    def capabilities_of(self, name: str) -> set[str]:
        """The compute capabilities of the accelerators matching ``name`` (empty: none known)."""
        wanted = _normalise(name)
        return {
            acc.compute_capability
            for acc in self.accelerators
            if acc.compute_capability and wanted and wanted in _normalise(acc.name)
        }

    def archs_of(self, name: str) -> set[str]:
        """The gfx targets of the accelerators matching ``name`` (empty: none known)."""
        wanted = _normalise(name)
        return {acc.arch for acc in self.accelerators if acc.arch and wanted and wanted in _normalise(acc.name)}

    def count_of(self, name: str) -> int:
        """How many accelerators here match ``name`` (case-insensitive; 'NVIDIA H200' matches
        'NVIDIA H200 NVL')."""
        wanted = _normalise(name)
        return sum(1 for acc in self.accelerators if wanted and wanted in _normalise(acc.name))

    def describe(self) -> str:
        """One line for messages: 'cpu (2 cores), no GPU' or '8x NVIDIA H200 (141 GiB) over nvlink'."""
        cpu = f"cpu ({self.cpu_count} cores)"
        if not self.accelerators:
            probed = "" if self.accelerator_source != "not probed" else " (GPUs not probed)"
            return f"{cpu}, no GPU{probed}"
        names: dict[str, int] = {}
        for acc in self.accelerators:
            names[acc.name] = names.get(acc.name, 0) + 1
        memory = self.accelerators[0].memory_bytes
        gpus = ", ".join(f"{count}x {name}" for name, count in names.items())
        archs = sorted({acc.arch for acc in self.accelerators if acc.arch})
        details = [f"{memory / 2**30:.0f} GiB each"] if memory else []
        details += archs
        if details:
            gpus += f" ({', '.join(details)})"
        return f"{gpus} over {self.interconnect}; {cpu}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("dependencies", None)
        data["accelerators"] = [asdict(acc) for acc in self.accelerators]
        data["accelerator_count"] = self.accelerator_count
        return data


def _normalise(name: str) -> str:
    return " ".join(name.lower().replace("-", " ").split())


def detect_environment(accelerators: bool = True, root: str | Path | None = None) -> Environment:
    """Describe this machine. ``accelerators=False`` skips GPU probing (fast path)."""
    if accelerators:
        found, source = detect_accelerators()
    else:
        found, source = (), "not probed"
    return Environment(
        accelerator=found[0].name if found else "cpu",
        accelerators=found,
        accelerator_source=source,
        interconnect=detect_interconnect(found),
        cpu_model=cpu_model(),
        cpu_count=os.cpu_count() or 1,
        os=f"{platform.system()} {platform.release()}",
        python=platform.python_version(),
        packages={name: package_version(name) for name in PACKAGES},
        cuda_driver=cuda_driver_version() if found else None,
        git=git_state(root),
    )


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def detect_accelerators() -> tuple[tuple[Accelerator, ...], str]:
    """GPUs via torch.cuda when torch is installed and sees any (CUDA or ROCm), else nvidia-smi,
    else rocm-smi, else none."""
    if find_spec("torch") is not None and _gpu_driver_present():
        try:
            import torch

            if torch.cuda.is_available():
                return torch_accelerators(torch), "torch"
        except Exception:  # a broken CUDA install must not break planning; fall through
            pass
    found = _smi_accelerators()
    if found:
        return found, "nvidia-smi"
    found = rocm_smi_accelerators(_rocm_smi(["--showproductname", "--json"]) or "", _rocm_smi(["--showhw"]) or "")
    if found:
        return found, "rocm-smi"
    return (), "none"


def torch_accelerators(torch: Any) -> tuple[Accelerator, ...]:
    """The GPUs torch sees. On ROCm (``torch.version.hip``) each carries its gfx target
    (``gcnArchName`` without feature flags) and no compute capability: ROCm's capability numbers
    are derived from the gfx target, not CUDA's."""
    hip = getattr(getattr(torch, "version", None), "hip", None)
    found = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        if hip:
            arch, capability = rocm.base_arch(getattr(props, "gcnArchName", None)), None
        else:
            arch, capability = None, "{}.{}".format(*torch.cuda.get_device_capability(i))
        found.append(Accelerator(i, torch.cuda.get_device_name(i), props.total_memory, capability, arch))
    return tuple(found)


def _smi_accelerators() -> tuple[Accelerator, ...]:
    smi = _nvidia_smi(["--query-gpu=index,name,memory.total,compute_cap", "--format=csv,noheader,nounits"])
    smi = smi or _nvidia_smi(["--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"])  # older drivers
    found = []
    for row in (smi or "").splitlines():
        parts = [p.strip() for p in row.split(",")]
        if len(parts) in (3, 4) and parts[0].isdigit():
            memory = int(float(parts[2]) * 2**20) if parts[2].replace(".", "", 1).isdigit() else None
            capability = parts[3] if len(parts) == 4 and parts[3].replace(".", "", 1).isdigit() else None
            found.append(Accelerator(int(parts[0]), parts[1], memory, capability))
    return tuple(found)


def rocm_smi_accelerators(product_json: str, showhw: str) -> tuple[Accelerator, ...]:
    """AMD GPUs from ``rocm-smi --showproductname --json`` (names, and the gfx target where this
    rocm-smi prints one), the gfx target from ``rocm-smi --showhw`` where it does not."""
    archs = rocm.hardware_archs(showhw)
    return tuple(
        Accelerator(i, name, None, None, arch or archs.get(i)) for i, name, arch in rocm.product_names(product_json)
    )


def _gpu_driver_present() -> bool:
    """No GPU driver, no GPU: saves importing torch (1-2 s) on CPU-only machines."""
    markers = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/kfd", "/dev/dxg")
    return any(shutil.which(smi) for smi in ("nvidia-smi", "rocm-smi")) or any(os.path.exists(m) for m in markers)


def detect_interconnect(found: tuple[Accelerator, ...]) -> str:
    if not found:
        return "loopback"
    if len(found) == 1:
        return "none"
    if any(acc.arch for acc in found):  # AMD: xGMI links, AMD's NVLink
        links = rocm.link_types(_rocm_smi(["--showtopotype", "--json"]) or "")
        return "unknown" if not links else ("xgmi" if "XGMI" in links else "pcie")
    topo = _nvidia_smi(["topo", "-m"])
    if topo is None:
        return "unknown"
    return "nvlink" if any(f"NV{n}" in topo for n in range(1, 19)) else "pcie"


def cuda_driver_version() -> str | None:
    out = _nvidia_smi(["--query-gpu=driver_version", "--format=csv,noheader"])
    return out.splitlines()[0].strip() if out else None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _nvidia_smi(args: list[str]) -> str | None:
    return _smi("nvidia-smi", args)


def _rocm_smi(args: list[str]) -> str | None:
    return _smi("rocm-smi", args)


def _smi(program: str, args: list[str]) -> str | None:
    exe = shutil.which(program)
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=_SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _git(args: list[str], cwd: str | Path | None) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=_GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_head(cwd: str | Path | None = None) -> str | None:
    return _git(["rev-parse", "HEAD"], cwd)


def git_branch(cwd: str | Path | None = None) -> str | None:
    branch = _git(["rev-parse", "--abbrev-ref", "HEAD"], cwd)
    return None if branch in (None, "HEAD") else branch


def git_dirty(cwd: str | Path | None = None) -> bool | None:
    status = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
    return None if status is None else bool(status)


def git_state(cwd: str | Path | None = None) -> GitState:
    return GitState(git_head(cwd), git_branch(cwd), git_dirty(cwd))
