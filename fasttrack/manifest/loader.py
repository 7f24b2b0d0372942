"""load_manifest: read → YAML with lines → schema → semantic rules → frozen Manifest."""

from __future__ import annotations

import hashlib
from pathlib import Path

from fasttrack.errors import ManifestError
from fasttrack.fileio import MANIFEST_MAX_BYTES, InputTooLarge, read_capped
from fasttrack.manifest.caps import scope_problem
from fasttrack.manifest.model import Manifest
from fasttrack.manifest.problems import Problem
from fasttrack.manifest.yaml_loader import LoadedYaml, load_yaml


def find_repository_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` holding .git; ``start`` itself if none."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return start


def check_text(text: str) -> tuple[LoadedYaml, list[Problem]]:
    """All problems of a manifest text, located (line filled in) and sorted by line."""
    from fasttrack.manifest.schema_check import schema_problems
    from fasttrack.manifest.semantic import semantic_problems

    loaded = load_yaml(text)
    problems = list(loaded.problems)
    if loaded.data is not None or not problems:
        if not isinstance(loaded.data, dict):
            if not problems:
                kind = type(loaded.data).__name__ if loaded.data is not None else "nothing"
                problems.append(Problem((), f"a manifest must be a mapping of sections, got {kind}"))
        else:
            schema = schema_problems(loaded.data)
            problems.extend(schema)
            # Sections with load or schema errors may have any shape: their rules are skipped.
            broken = {str(p.path[0]) for p in problems if p.path}
            if not any(p.path == () and p.line is not None for p in loaded.problems):
                problems.extend(semantic_problems(loaded.data, broken))
    located = [p if p.line is not None else p.located(loaded.line_of(p.path)) for p in problems]
    located.sort(key=lambda p: (p.line or 0, p.severity != "error"))
    return loaded, located


def load_manifest(path: str | Path) -> Manifest:
    """Load and validate a manifest; raise ManifestError listing every problem found."""
    from fasttrack.manifest.build import build_manifest

    path = Path(path)
    shown = str(path)
    try:
        raw = read_capped(path, MANIFEST_MAX_BYTES)
    except InputTooLarge as err:
        raise ManifestError(shown, [f"{shown}:1: $: the file is {err}; a manifest is a few kB"]) from None
    except OSError as err:
        raise ManifestError(shown, [f"{shown}:1: $: cannot read file: {err.strerror or err}"]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ManifestError(
            shown, [f"{shown}:1: $: the file is not UTF-8 text ({err.reason} at byte {err.start})"]
        ) from None
    loaded, problems = check_text(text)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise ManifestError(shown, [p.format(shown) for p in problems])
    warnings = tuple(p.format(shown) for p in problems if p.severity == "warning")
    root = find_repository_root(path.parent)
    assert isinstance(loaded.data, dict)
    manifest = build_manifest(loaded.data, path, hashlib.sha256(raw).hexdigest(), root, warnings, loaded.lines)
    too_big = scope_problem(manifest.scope_size())
    if too_big:
        raise ManifestError(shown, [f"{shown}:{loaded.line_of(('scope',)) or 1}: $.scope: {too_big}"])
    return manifest


def load_manifest_data(data: object, source: str, sha256: str, root: Path) -> Manifest:
    """A manifest from plain data already loaded (the copy evidence keeps of the manifest it
    checked), validated by the same schema and rules as a file; ManifestError otherwise."""
    from fasttrack.manifest.build import build_manifest
    from fasttrack.manifest.schema_check import schema_problems
    from fasttrack.manifest.semantic import semantic_problems

    if not isinstance(data, dict):
        raise ManifestError(source, [f"{source}: $: a manifest must be a mapping of sections"])
    problems = list(schema_problems(data))
    broken = {str(p.path[0]) for p in problems if p.path}
    problems.extend(semantic_problems(data, broken))
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise ManifestError(source, [p.format(source) for p in errors])
    manifest = build_manifest(data, Path(root) / source, sha256, Path(root), (), {})
    too_big = scope_problem(manifest.scope_size())
    if too_big:
        raise ManifestError(source, [f"{source}: $.scope: {too_big}"])
    return manifest
