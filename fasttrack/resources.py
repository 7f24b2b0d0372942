"""Locate the data that ships with fasttrack (schemas/, checks/).

In a built wheel they live under ``fasttrack/_data``; in a source checkout or editable install
they are the top-level ``schemas/`` and ``checks/`` folders.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the directory of shipped data called ``name`` ("schemas" or "checks")."""
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"fasttrack data folder {name!r} is missing from this installation")


def schema_path(kind: str) -> Path:
    return data_dir("schemas") / f"{kind}.schema.json"


@cache
def load_schema(kind: str) -> dict[str, Any]:
    """Load ``schemas/<kind>.schema.json`` (kind: "manifest" or "evidence")."""
    with schema_path(kind).open(encoding="utf-8") as fh:
        return json.load(fh)


def evidence_schema(kinds: Iterable[str]) -> dict[str, Any]:
    """The evidence schema for the check kinds ``kinds`` (the registry's names, in its order): the
    shipped schema with its outcome kind enum generated from them. `fasttrack schema evidence`
    prints it for the registry, and schemas/evidence.schema.json is that output (a test keeps it so)."""
    schema = copy.deepcopy(load_schema("evidence"))
    schema["$defs"]["check"]["properties"]["kind"]["enum"] = list(kinds)
    return schema


def schema_text(schema: dict[str, Any]) -> str:
    """A schema as the files in schemas/ hold it."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
