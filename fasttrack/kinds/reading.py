"""Small readers shared by the rules: numbers that may be missing, JSON that may be malformed."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest


def measurements(outcome: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping(outcome.get("measurements"))


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one (malformed evidence reads as missing)."""
    return value if isinstance(value, Mapping) else {}


def number(value: Any) -> float | None:
    """A finite number, or None (missing, null, not a number, a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


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
