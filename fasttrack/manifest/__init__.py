"""Manifests: load YAML with line numbers, validate (schema + semantic rules), expose a frozen
typed model and its scope points.

    from fasttrack.manifest import load_manifest
    manifest = load_manifest("fasttrack.yaml")      # raises ManifestError listing every problem
    for point in manifest.scope_points(["accelerator", "batch"]):
        print(point.id)
"""

from fasttrack.manifest.loader import check_text, find_repository_root, load_manifest
from fasttrack.manifest.model import Manifest
from fasttrack.manifest.placeholders import render_command
from fasttrack.manifest.scope import (
    DIMENSIONS,
    HARDWARE_DIMENSIONS,
    KNOWN_ENGINE_DIMENSIONS,
    ScopePoint,
    representative_batches,
)
from fasttrack.manifest.sections import PRESERVED_FEATURES

__all__ = [
    "DIMENSIONS",
    "HARDWARE_DIMENSIONS",
    "KNOWN_ENGINE_DIMENSIONS",
    "PRESERVED_FEATURES",
    "Manifest",
    "ScopePoint",
    "check_text",
    "find_repository_root",
    "load_manifest",
    "render_command",
    "representative_batches",
]
