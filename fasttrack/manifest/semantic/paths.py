"""Paths the manifest names stay inside the repository: code, allowed and gated paths, kernel
test paths and audited tests are relative and never climb out with ``..`` (#35: a test file
outside the checkout was run; ``/`` or ``../**`` in allowed_paths allows anything)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fasttrack.manifest.problems import Problem
from fasttrack.manifest.semantic.common import error


def leaves_repository(path: str) -> str | None:
    """Why ``path`` (a glob, a path or a pytest node id) leaves the repository; None if it stays."""
    text = path.split("::", 1)[0].replace("\\", "/")
    if text.startswith(("/", "~")) or (len(text) > 1 and text[1] == ":"):
        return f"{path!r} is absolute: paths are relative to the repository root"
    if ".." in text.split("/"):
        return f"{path!r} climbs out with '..': paths must stay inside the repository"
    return None


def _named(data: Mapping[str, Any]) -> Iterator[tuple[tuple[Any, ...], str]]:
    model = data.get("model")
    model = model if isinstance(model, Mapping) else {}
    for key in ("code_paths", "allowed_paths", "gated_paths"):
        for n, path in enumerate(model.get(key) or ()):
            yield ("model", key, n), path
    for n, suite in enumerate(data.get("kernel_tests") or ()):
        if isinstance(suite, Mapping):
            for m, path in enumerate(suite.get("paths") or ()):
                yield ("kernel_tests", n, "paths", m), path
    for n, audit in enumerate(data.get("audits") or ()):
        if isinstance(audit, Mapping) and "test" in audit:
            yield ("audits", n, "test"), audit["test"]


def repository_paths(data: Mapping[str, Any]) -> Iterator[Problem]:
    for where, path in _named(data):
        why = leaves_repository(path) if isinstance(path, str) else None
        if why:
            yield error(where, why)
