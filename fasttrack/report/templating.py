"""The jinja environment and the inline assets shared by the HTML report and the dashboard."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

_HERE = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def environment() -> Environment:
    """Autoescaping everywhere: model outputs are data, never markup."""
    return Environment(
        loader=FileSystemLoader(str(_HERE / "templates")),
        autoescape=select_autoescape(enabled_extensions=("html", "j2"), default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


@lru_cache(maxsize=1)
def static_assets() -> tuple[str, str]:
    """(CSS, script) inlined into every page: no external resources."""
    return (_HERE / "static" / "report.css").read_text("utf-8"), (_HERE / "static" / "report.js").read_text("utf-8")
