"""Fixture projects: the planted-fault projects under tests/fixtures/faults, made git repositories."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

FAULTS = Path(__file__).resolve().parents[1] / "fixtures" / "faults"


def git(root: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "HOME": str(root),
    }
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout.strip()


def commit_all(root: Path, message: str = "fixture") -> Path:
    """``root`` as a git repository on branch main with everything in it committed."""
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return root


def materialise(dest: Path, fault: str | None = None) -> Path:
    """``dest`` holds base/ plus the fault's files, committed on branch main. Returns ``dest``."""
    shutil.copytree(FAULTS / "base", dest, dirs_exist_ok=True)
    if fault:
        shutil.copytree(FAULTS / fault, dest, dirs_exist_ok=True)
    return commit_all(dest)


def load_module(path: Path, name: str) -> ModuleType:
    """A module of a fixture project (which is not importable from here) by its file path."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
