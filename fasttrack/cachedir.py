"""Where fasttrack keeps what it learns between runs on this machine (the eval baseline cache,
measured check costs): $FASTTRACK_CACHE_DIR, else the user's cache directory."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TypeGuard


def cache_dir() -> Path:
    if os.environ.get("FASTTRACK_CACHE_DIR"):
        return Path(os.environ["FASTTRACK_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fasttrack"


def is_seconds(value: object) -> TypeGuard[float]:
    """A stored cost that can be used: a finite number of seconds, not negative (a cache file is
    read back as found: anything else in it is ignored, never trusted)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
