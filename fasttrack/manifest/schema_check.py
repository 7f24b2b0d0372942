"""Validate manifest data against schemas/manifest.schema.json, collecting every error."""

from __future__ import annotations

import difflib
from functools import lru_cache
from typing import Any

from fasttrack.manifest.problems import Problem


@lru_cache(maxsize=1)
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    from fasttrack.resources import load_schema

    return Draft202012Validator(load_schema("manifest"))


def schema_problems(data: object) -> list[Problem]:
    """Every schema violation as a Problem (path + readable message), deepest first per branch."""
    from jsonschema.exceptions import best_match, relevance

    problems = []
    for error in sorted(_validator().iter_errors(data), key=relevance):
        path = tuple(error.absolute_path)
        message = _message(error)
        if error.context and not _has_own_message(error):
            best = best_match(error.context)
            best_path = path + tuple(best.relative_path)
            from fasttrack.manifest.problems import json_path

            message += f" (best match: {json_path(best_path)}: {_message(best)})"
        problems.append(Problem(_point_at(error, path), message))
    return problems


def _has_own_message(error: Any) -> bool:
    """A choice (oneOf) whose schema says in its own words what is wrong: its alternatives' errors
    ("'switch' is a required property") would only repeat it less clearly."""
    return error.validator == "oneOf" and isinstance(error.schema, dict) and bool(error.schema.get("x-error"))


def _message(error: Any) -> str:
    custom = error.schema.get("x-error") if isinstance(error.schema, dict) else None
    if custom and error.validator in ("const", "enum"):
        return f"{custom} (got {error.instance!r})"
    if custom and error.validator == "oneOf":
        return str(custom)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        parts = []
        for key in unknown:
            close = difflib.get_close_matches(key, allowed, n=1)
            parts.append(f"unknown key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        return "; ".join(parts) + f"; allowed keys: {', '.join(allowed)}"
    if error.validator == "const":
        return f"must be {error.validator_value!r} (got {error.instance!r})"
    return error.message


def _point_at(error: Any, path: tuple) -> tuple:
    # A choice between keys (switch or switches) given twice: point at the second one given.
    if _has_own_message(error) and isinstance(error.instance, dict):
        keys = {k for alt in error.validator_value if isinstance(alt, dict) for k in alt.get("required", ())}
        given = [k for k in error.instance if k in keys]
        if len(given) > 1:
            return (*path, given[-1])
    # For unknown keys, point at the first unknown key's line rather than at its parent.
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        unknown = [key for key in error.instance if key not in allowed]
        if unknown:
            return (*path, unknown[0])
    return path
