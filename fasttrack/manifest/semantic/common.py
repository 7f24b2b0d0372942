"""Readers and helpers every rule topic shares: problems (errors and warnings), duplicate ids,
strictly increasing lists, the scope's engine dimensions and values, a point inside the scope, the
switch entries of a manifest."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from fasttrack.manifest.problems import Path, Problem
from fasttrack.manifest.scope import DIMENSIONS, HARDWARE_DIMENSIONS, MODEL_DIMENSION, PARALLEL_DIMENSIONS
from fasttrack.manifest.sections import ENV_OFF_VALUES


def error(path: Path, message: str) -> Problem:
    return Problem(path, message)


def warning(path: Path, message: str) -> Problem:
    return Problem(path, message, severity="warning")


def duplicates(items: Iterable[Mapping[str, Any]], path: Path, what: str, key: str = "id") -> Iterator[Problem]:
    seen: dict[Any, int] = {}
    for index, item in enumerate(items):
        value = item.get(key)
        if value in seen:
            yield error((*path, index, key), f"duplicate {what} id {value!r} (also {path[-1]}[{seen[value]}])")
        else:
            seen[value] = index


def increasing(values: list, path: Path, what: str) -> Iterator[Problem]:
    for index in range(1, len(values)):
        if values[index] <= values[index - 1]:
            yield error(
                (*path, index), f"{what} must be strictly increasing ({values[index - 1]} then {values[index]})"
            )
            return


RESERVED_DIMENSION_NAMES = frozenset({*DIMENSIONS, "port", MODEL_DIMENSION, *PARALLEL_DIMENSIONS.values()})


def engine_dimensions(scope: Mapping[str, Any]) -> dict[str, list[Any]]:
    """scope.models (``model``), scope.engine, plus decode-context / expert / data parallelism
    listing a degree above 1 (as `fasttrack.manifest.model.Scope.engine_values`)."""
    values = {MODEL_DIMENSION: list(scope["models"])} if scope.get("models") else {}
    values |= {
        name: list(v)
        for name, v in (scope.get("engine") or {}).items()
        if isinstance(v, list) and name not in RESERVED_DIMENSION_NAMES  # reported by engine_scope
    }
    par = scope.get("parallelism") or {}
    for key, name in PARALLEL_DIMENSIONS.items():
        degrees = par.get(key) or []
        if any(isinstance(d, int) and d > 1 for d in degrees):
            values[name] = list(degrees)
    return values


def deployment_dimensions(scope: Mapping[str, Any]) -> set[str]:
    return {*HARDWARE_DIMENSIONS, *engine_dimensions(scope)}


def present_dimensions(scope: Mapping[str, Any]) -> set[str]:
    present = {"accelerator", "device_count", "tensor_parallel", *engine_dimensions(scope)}
    for name, key in (
        ("batch", "batch"),
        ("tokens_per_step", "tokens_per_step"),
        ("dtype", "dtypes"),
        ("draft_length", "speculative"),
        ("context", "context"),
    ):
        if scope.get(key):
            present.add(name)
    return present


def dimension_values(scope: Mapping[str, Any]) -> dict[str, set]:
    values: dict[str, set] = {
        "accelerator": {h["accelerator"] for h in scope["hardware"]},
        "device_count": {c for h in scope["hardware"] for c in h["device_counts"]},
        "tensor_parallel": {t for h in scope["hardware"] for t in h["tensor_parallel"]},
    }
    if scope.get("dtypes"):
        values["dtype"] = set(scope["dtypes"])
    if scope.get("tokens_per_step"):
        values["tokens_per_step"] = set(scope["tokens_per_step"])
    if scope.get("speculative"):
        values["draft_length"] = set(scope["speculative"]["draft_lengths"])
    if scope.get("context"):
        values["context"] = set(scope["context"].get("buckets") or [scope["context"]["max_tokens"]])
    for name, chosen in engine_dimensions(scope).items():
        values[name] = set(chosen)
    return values


def engine_scope(data: Mapping[str, Any]) -> Iterator[Problem]:
    scope = data["scope"]
    for name in scope.get("engine") or {}:
        if name in RESERVED_DIMENSION_NAMES:
            where = {
                "decode_context_parallel": "scope.parallelism.decode_context",
                "expert_parallel": "scope.parallelism.expert",
                "data_parallel": "scope.parallelism.data",
                MODEL_DIMENSION: "scope.models",
            }
            yield error(
                ("scope", "engine", name),
                f"{name!r} is not an engine dimension name: it is "
                + (f"declared in {where[name]}" if name in where else "a built-in scope dimension or placeholder"),
            )
    for index, entry in enumerate(scope["hardware"]):
        if entry.get("compute_capability") and entry["accelerator"].strip().lower() == "cpu":
            yield error(
                ("scope", "hardware", index, "compute_capability"), "a cpu entry has no CUDA compute capability"
            )


def point_in_scope(
    scope: Mapping[str, Any], values: Mapping[str, set], dim: str, value: Any, path: Path
) -> Iterator[Problem]:
    if dim == "batch":
        batch = scope["batch"]
        if batch["min"] > batch["max"]:
            return  # reported once at scope.batch
        if not isinstance(value, int) or not batch["min"] <= value <= batch["max"]:
            yield error(path, f"batch {value!r} is outside scope.batch ({batch['min']}..{batch['max']})")
    elif value not in values.get(dim, set()):
        allowed = ", ".join(str(v) for v in sorted(values.get(dim, set()), key=str))
        yield error(path, f"{dim} {value!r} is not in the scope (declared: {allowed})")


def region_problems(
    scope: Mapping[str, Any], values: Mapping[str, set], present: Any, region: Mapping[str, Any], path: Path
) -> Iterator[Problem]:
    """A region's (``expect``/``census`` ``points``) dimensions are declared and its values in scope."""
    for dim, points in region.items():
        if dim not in present:
            yield error((*path, "points", dim), f"point dimension {dim!r} is not declared in the scope")
            continue
        for j, value in enumerate(points):
            yield from point_in_scope(scope, values, dim, value, (*path, "points", dim, j))


def switch_entries(data: Mapping[str, Any]) -> list[tuple[Path, Mapping[str, Any]]]:
    """(path, section) of every switch: the ``switches`` list or the one ``switch``."""
    if isinstance(data.get("switches"), list):
        return [(("switches", i), s) for i, s in enumerate(data["switches"]) if isinstance(s, dict)]
    if isinstance(data.get("switch"), dict):
        return [(("switch",), data["switch"])]
    return []


def env_assignment(text: str | None) -> tuple[str, str] | None:
    if not text or "=" not in text:
        return None
    name, value = text.split("=", 1)
    return name, value


def is_off_value(value: str) -> bool:
    return value.strip().lower() in ENV_OFF_VALUES


def single_valued_engine(scope: Any) -> dict[str, Any]:
    """``scope.engine``'s dimensions with one value, name -> that value: what a server must be told
    (the parallel degrees and the checkpoint reach it otherwise: fasttrack's own flags, the model)."""
    engine = scope.get("engine") if isinstance(scope, Mapping) else None
    if not isinstance(engine, Mapping):
        return {}
    return {
        str(name): values[0]
        for name, values in engine.items()
        if isinstance(values, list) and len(values) == 1 and name not in RESERVED_DIMENSION_NAMES
    }


def single_value_unused(name: str, value: Any, who: str, where: str) -> str:
    return (
        f"scope engine dimension {name!r} has the one value {value!r}, but {who} {{{name}}}: the servers are "
        f"never told it, yet every point says {name}={value}; use {{{name}}} in {where} or leave the dimension out"
    )
