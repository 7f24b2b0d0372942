"""Locate the data that ships with fasttrack (schemas/, checks/).

In a built wheel they live under ``fasttrack/_data``; in a source checkout or editable install
they are the top-level ``schemas/`` and ``checks/`` folders.
"""

from __future__ import annotations

import json
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
