"""One problem found in a manifest, and the one format every problem is printed in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Path = tuple[str | int, ...]
Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """A problem at a location in the manifest: ``file:line: $.json.path: message``."""

    path: Path
    message: str
    severity: Severity = "error"
    line: int | None = None  # filled in from the line map when the problem is located

    def located(self, line: int) -> Problem:
        return Problem(self.path, self.message, self.severity, line)

    def format(self, filename: str) -> str:
        prefix = "warning: " if self.severity == "warning" else ""
        line = self.line if self.line is not None else 1
        return f"{filename}:{line}: {prefix}{json_path(self.path)}: {self.message}"


def json_path(path: Path) -> str:
    """Render a path as JSONPath: ``$.scope.hardware[0].accelerator``."""
    out = ["$"]
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif part.isidentifier():
            out.append(f".{part}")
        else:
            out.append("[" + repr(part) + "]")
    return "".join(out)
