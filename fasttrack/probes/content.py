"""The probe content fasttrack ships in ``checks/features/``: prompts and JSON schemas."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from fasttrack.resources import data_dir

DEFAULT_SCHEMAS = ("person.json", "order.json", "ticket.json")


def features_dir() -> Path:
    return data_dir("checks") / "features"


@lru_cache(maxsize=1)
def prompts() -> dict[str, Any]:
    with (features_dir() / "prompts.json").open(encoding="utf-8") as fh:
        return json.load(fh)


def load_schema_file(path: Path) -> dict[str, Any]:
    """A JSON schema file, checked against its meta-schema (a broken probe must not pass)."""
    from jsonschema import Draft202012Validator

    with Path(path).open(encoding="utf-8") as fh:
        schema = json.load(fh)
    Draft202012Validator.check_schema(schema)
    return schema


def default_schema_paths() -> list[Path]:
    return [features_dir() / "schemas" / name for name in DEFAULT_SCHEMAS]


def prompt_for_schema(path: Path) -> str:
    by_name = prompts()["structured_output"]
    return by_name.get(Path(path).name, f"Return a JSON object matching the schema {Path(path).stem}.\n")
