"""Placeholders in target server commands: ``{port}``, the scope dimensions and the engine
dimensions a manifest declares (``{kv_cache_dtype}``: whatever the scope point carries)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from fasttrack.manifest.scope import DIMENSIONS, ScopePoint

# {port} and {server_dir} (the server's own folder) are filled by the server manager at start.
PLACEHOLDERS: tuple[str, ...] = ("port", "server_dir", *DIMENSIONS)
# Only {identifier} tokens: JSON arguments such as '{"method": "dspark"}' are left alone.
PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def render_command(
    command: Sequence[str], port: int | None = None, point: ScopePoint | None = None, leave: Sequence[str] = ()
) -> list[str]:
    """Replace ``{port}`` and ``{<dimension>}`` tokens; raise ValueError for a token with no value
    unless it is named in ``leave`` (filled later, e.g. ``{port}`` by the server manager)."""
    values = {} if point is None else {k: str(v) for k, v in point.dims}
    if port is not None:
        values["port"] = str(port)

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if (name not in PLACEHOLDERS and name not in values) or (name in leave and name not in values):
            return match.group(0)
        if name not in values:
            raise ValueError(f"command placeholder {{{name}}} has no value for this check")
        return values[name]

    return [PLACEHOLDER_RE.sub(replace, arg) for arg in command]
