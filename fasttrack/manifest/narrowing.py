"""Checks a manifest narrows with ``points`` to fewer hardware setups than its scope.

One list of where ``points`` may stand (each eval, divergence, each feature probe, and
``scope.speculative`` for the speculative check), read by the semantic rule that validates the
values, by the planner, and by the report's reviewer checklist.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Path = tuple[Any, ...]


def narrowed_points(data: Mapping[str, Any]) -> list[tuple[Path, str, Mapping[str, Any]]]:
    """(path of ``points`` in the manifest data, check label, points) for every check that sets
    non-empty ``points``; tolerant of malformed sections (validation reports those elsewhere)."""
    found: list[tuple[Path, str, Any]] = []
    for i, ev in enumerate(data.get("evals") or ()):
        if isinstance(ev, Mapping):
            found.append((("evals", i, "points"), f"evals {ev.get('id')}", ev.get("points")))
    if isinstance(data.get("divergence"), Mapping):
        found.append((("divergence", "points"), "divergence", data["divergence"].get("points")))
    if isinstance(data.get("stock_unchanged"), Mapping):
        found.append((("stock_unchanged", "points"), "stock_unchanged", data["stock_unchanged"].get("points")))
    features = data.get("features")
    for name, conf in features.items() if isinstance(features, Mapping) else ():
        if isinstance(conf, Mapping):
            found.append((("features", name, "points"), f"features {name}", conf.get("points")))
    scope = data.get("scope")
    speculative = scope.get("speculative") if isinstance(scope, Mapping) else None
    if isinstance(speculative, Mapping):
        found.append((("scope", "speculative", "points"), "speculative", speculative.get("points")))
    return [(path, label, points) for path, label, points in found if isinstance(points, Mapping) and points]


def within(point: Any, points: Mapping[str, Any]) -> bool:
    """Whether a scope point (a ScopePoint or a mapping) has one of the listed values in every
    dimension ``points`` names (empty ``points``: every point)."""
    return all(point.get(dim) in values for dim, values in points.items())
