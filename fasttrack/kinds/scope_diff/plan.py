"""``scope_diff``: one global instance (no scope point): changed files vs ``model.code_paths``."""

from __future__ import annotations

import glob
from collections.abc import Iterable
from typing import TYPE_CHECKING

from fasttrack.plan.blockers import Blocker

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest
    from fasttrack.plan import CheckInstance, Planner


def plan(planner: Planner) -> Iterable[CheckInstance]:
    m = planner.m
    timeout = m.timeout_for("scope_diff")
    config = {"code_paths": list(m.model.code_paths), "allowed_paths": list(m.model.allowed_paths)}
    blocker = planner.dependency_blocker("scope_diff")
    if blocker is None and not (m.root / ".git").exists():
        blocker = Blocker(
            "target",
            f"{m.root.name or m.root} is not a git repository: nothing to diff",
            "git repository",
        )
    elif blocker is None and not _code_paths_exist(m):
        patterns = ", ".join(m.model.code_paths)
        blocker = Blocker(
            "target",
            f"no file in this repository matches model.code_paths ({patterns}); run the gate in the repository that holds the model's code",
            "the model's repository",
        )
    yield planner.instance("scope_diff", "code_paths", None, True, blocker, 2.0, timeout, config)


def _code_paths_exist(m: Manifest) -> bool:
    root = m.root
    for pattern in m.model.code_paths:
        for match in glob.iglob(pattern, root_dir=str(root), recursive=True):
            if (root / match).is_file():  # glob yields 'missing/' for 'missing/**'
                return True
    return False
