"""Content-addressed cache of baseline per-item eval results.

The stock path does not change between runs of a fast-track PR, so its eval results can be reused.
The key covers everything that could change them: model id and revision, the baseline code
identity (e.g. a git tree hash of the model code), the task definition hash (task files, data
files, lm-eval version), generation settings, seeds, repeats, metric and scope point. Items are
stored per doc id, so a later run with a different limit or sequential stopping point reuses what
it can. Without a baseline identity nothing is cached (an unidentified baseline cannot be trusted
to be the same one).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.cachedir import is_seconds
from fasttrack.kinds.evals.tasks import ItemRecord
from fasttrack.manifest.sections import SERVER_KINDS

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.manifest import Manifest

CACHE_FORMAT = 1


def _files_matching(root: Path, pattern: str) -> list[Path]:
    """Files of ``pattern`` under ``root``. Before Python 3.13 ``dir/**`` matches directories only,
    so a trailing ``**`` also takes every file below; byte-code caches are left out (they appear
    after the first import and would change the identity between two runs of the same code)."""
    expanded = pattern + "/*" if pattern.rstrip("/").endswith("**") else pattern
    return [
        p
        for p in root.glob(expanded)
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    ]


def code_identity(root: Path, globs: Sequence[str]) -> str:
    """sha256 over the paths and bytes of the files matching ``globs`` under ``root`` (the
    baseline's model code), independent of git state and file order."""
    h = hashlib.sha256()
    files = sorted({p for g in globs for p in _files_matching(Path(root), g)})
    for f in files:
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def cache_key(material: Mapping[str, Any]) -> str:
    canonical = json.dumps({"format": CACHE_FORMAT, **material}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass
class BaselineCache:
    path: Path | None  # None: caching disabled
    key: str | None
    items: dict[int, ItemRecord]
    hits: int = 0
    # what each cached item cost to run, so a later run can tell what a run without the cache
    # costs (the --timeout-scale hint for deciding an underpowered eval on its whole set)
    seconds: dict[int, float] = field(default_factory=dict)
    saved_s: float = 0.0  # the stored cost of this run's hits
    hits_of_unknown_cost: int = 0  # hits from a cache file written before costs were stored

    @staticmethod
    def open(cache_dir: Path | None, material: Mapping[str, Any] | None, *, enabled: bool = True) -> BaselineCache:
        if not enabled or cache_dir is None or material is None:
            return BaselineCache(None, None, {})
        key = cache_key(material)
        path = Path(cache_dir) / "evals" / f"{key}.json"
        items: dict[int, ItemRecord] = {}
        seconds: dict[int, float] = {}
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                if data.get("key") == key:
                    items = {int(k): ItemRecord.from_json(v) for k, v in data["items"].items()}
                    seconds = {int(k): float(v) for k, v in (data.get("seconds") or {}).items() if is_seconds(v)}
            except (ValueError, KeyError, TypeError, AttributeError):
                items, seconds = {}, {}  # a damaged cache file is ignored and rewritten
        return BaselineCache(path, key, items, seconds=seconds)

    def take(self, doc_ids: list[int]) -> tuple[dict[int, ItemRecord], list[int]]:
        """(cached records, ids still to evaluate)."""
        got = {i: self.items[i] for i in doc_ids if i in self.items}
        self.hits += len(got)
        self.saved_s += sum(self.seconds[i] for i in got if i in self.seconds)
        self.hits_of_unknown_cost += sum(1 for i in got if i not in self.seconds)
        return got, [i for i in doc_ids if i not in got]

    def add(self, records: Mapping[int, ItemRecord], seconds_each: float | None = None) -> None:
        """Store ``records`` (each took ``seconds_each`` to run, when known)."""
        if self.path is None or not records:
            return
        # never cache a broken baseline response
        kept = {i: r for i, r in records.items() if r.non_finite == 0}
        self.items.update(kept)
        if is_seconds(seconds_each):
            self.seconds.update(dict.fromkeys(kept, seconds_each))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "key": self.key,
            "items": {str(i): r.to_json() for i, r in sorted(self.items.items())},
            "seconds": {str(i): s for i, s in sorted(self.seconds.items())},
        }
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(payload, fh)
        os.replace(tmp, self.path)


def no_cache(context: RunContext) -> bool:
    return bool(getattr(context, "no_cache", False)) or os.environ.get("FASTTRACK_NO_CACHE") == "1"


def baseline_identity(manifest: Manifest, point: Mapping[str, Any] | None) -> dict[str, Any]:
    """What makes the baseline's results what they are (the cache key's baseline part)."""
    from fasttrack.targets.python.factory import factory_options

    target = manifest.target
    options: Any = None
    if target.kind == "python" and target.python is not None:
        options = {"factory": target.python.factory, "options": factory_options(manifest, "baseline", point)}
    elif target.kind in SERVER_KINDS and target.openai is not None:
        side = target.openai.baseline
        options = {
            "command": list(side.command or ()),
            "url": side.url,
            "env": dict(side.env),
            "model": target.openai.model_name,
        }
    return {
        "model": manifest.model.id,
        "revision": manifest.model.revision,
        "code": code_identity(Path(manifest.root), list(manifest.model.code_paths)),
        "target": options,
        "scope_point": dict(point or {}),
    }
