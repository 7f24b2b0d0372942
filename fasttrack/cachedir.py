"""Where fasttrack keeps what it learns between runs on this machine (the eval baseline cache,
measured check costs): $FASTTRACK_CACHE_DIR, else the user's cache directory."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    if os.environ.get("FASTTRACK_CACHE_DIR"):
        return Path(os.environ["FASTTRACK_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fasttrack"
