"""Small readers of evidence JSON that may be malformed (numbers that may be missing, a mapping
that may be something else), shared by the measurement models, the rules and the reports; and
the `Subject` a rule consults besides the outcome."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one (malformed evidence reads as missing)."""
    return value if isinstance(value, Mapping) else {}


def number(value: Any) -> float | None:
    """A finite number as recorded (an int stays an int), or None (missing, null, text, a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def count(value: Any) -> int | None:
    """A non-negative whole count, or None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def status(outcome: Mapping[str, Any]) -> str:
    return str(outcome.get("status"))


@dataclass(frozen=True)
class Subject:
    """What a rule may consult besides the outcome: the manifest (re-built from the evidence's
    copy, or the --manifest given) and the whole evidence (plain JSON)."""

    manifest: Manifest
    evidence: Mapping[str, Any]
