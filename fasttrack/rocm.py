"""AMD accelerators: what ``rocm-smi`` prints, read into names and architectures, and the
architecture each Instinct product has.

An AMD GPU's architecture is its LLVM target, ``gfx942`` (MI300X, MI300A, MI325X) or ``gfx950``
(MI350X, MI355X): ROCm's torch reports it as ``get_device_properties(i).gcnArchName`` with the
target's feature flags (``gfx942:sramecc+:xnack-``), ``rocm-smi`` as "GFX Version" (``--showproductname
--json``) or the "GFX VER" column (``--showhw``). It plays the part a CUDA compute capability plays
on NVIDIA GPUs; AMD GPUs have none (ROCm's torch answers ``get_device_capability`` with numbers
derived from the gfx target, which are not CUDA capabilities).

Nothing here runs a program: ``fasttrack.environment`` runs ``rocm-smi`` and hands the text over,
so the parsers are tested on output captured from real machines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

# The Instinct products and their gfx target (LLVM AMDGPU processors; ROCm's hardware tables).
PRODUCT_ARCH = {
    "mi100": "gfx908",
    "mi210": "gfx90a",
    "mi250": "gfx90a",
    "mi250x": "gfx90a",
    "mi300a": "gfx942",
    "mi300x": "gfx942",
    "mi308x": "gfx942",
    "mi325x": "gfx942",
    "mi350x": "gfx950",
    "mi355x": "gfx950",
}
_PRODUCT = re.compile(r"\bmi\s?(\d{3}[a-z]?)\b")
_ARCH = re.compile(r"\bgfx[0-9a-f]{3,4}\b")
_NAME_KEYS = ("Card Series", "Card series", "Device Name", "Card Model", "Card model")
_ARCH_KEYS = ("GFX Version", "gfx version", "Target Graphics Version")


def base_arch(text: str | None) -> str | None:
    """``gfx942`` of ``gfx942:sramecc+:xnack-`` (or of any text naming one), else None."""
    found = _ARCH.search(str(text or "").lower())
    return found.group(0) if found else None


def product_of(name: str) -> str | None:
    """The Instinct product a name says (``mi300x`` of 'AMD Instinct MI300X OAM'), else None."""
    found = _PRODUCT.search(name.lower().replace("-", " "))
    return f"mi{found.group(1)}" if found else None


def vendor_of(name: str) -> str | None:
    """'amd', 'nvidia' or None (a name that says neither, e.g. 'cpu')."""
    lowered = name.lower()
    if "amd" in lowered or "instinct" in lowered or "radeon" in lowered or product_of(name):
        return "amd"
    if "nvidia" in lowered or re.search(r"\b(gb|b|h|a|l|v)\d{2,3}\b", lowered):
        return "nvidia"
    return None


def product_names(text: str) -> list[tuple[int, str, str | None]]:
    """``rocm-smi --showproductname --json``: (index, name, gfx target) per card, in card order.
    The name is the card series, or the device name or model where the series is 'N/A'."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    if not isinstance(data, Mapping):
        return []
    found = []
    for key, card in data.items():
        index = re.fullmatch(r"card(\d+)", str(key))
        if index is None or not isinstance(card, Mapping):
            continue
        name = next((str(card[k]).strip() for k in _NAME_KEYS if _known(card.get(k))), None)
        arch = next((base_arch(card[k]) for k in _ARCH_KEYS if _known(card.get(k))), None)
        if name:
            found.append((int(index.group(1)), name, arch))
    return sorted(found)


def hardware_archs(text: str) -> dict[int, str]:
    """``rocm-smi --showhw`` (a table; no JSON): the "GFX VER" of each GPU, by index."""
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith(("=", "WARNING"))]
    header = next((line for line in lines if line.split()[:1] == ["GPU"]), None)
    if header is None:
        return {}
    columns = re.split(r"\s{2,}", header.strip())
    if "GFX VER" not in columns:
        return {}
    at, gpu = columns.index("GFX VER"), columns.index("GPU")
    found = {}
    for line in lines[lines.index(header) + 1 :]:
        words = line.split()
        if len(words) == len(columns) and words[gpu].isdigit() and base_arch(words[at]):
            found[int(words[gpu])] = str(base_arch(words[at]))
    return found


def link_types(text: str) -> set[str]:
    """``rocm-smi --showtopotype --json``: the link types between the GPUs ('XGMI', 'PCIE')."""
    try:
        data = json.loads(text)
    except ValueError:
        return set()
    system = data.get("system") if isinstance(data, Mapping) else None
    if not isinstance(system, Mapping):
        return set()
    return {str(v).strip().upper() for k, v in system.items() if "link type between" in str(k).lower()}


def _known(value: Any) -> bool:
    return value is not None and str(value).strip() not in ("", "N/A", "n/a")
