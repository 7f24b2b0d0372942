"""Builds besides the engine's that an optimisation depends on (``target.dependencies``:
flashinfer, aiter, NVSHMEM): what is installed here, and whether it meets the manifest.

Each dependency is read once before the checks, the way the engine build is
(``fasttrack.targets.build``):

- by default from fasttrack's own interpreter, without importing anything: the version from
  ``importlib.metadata``; the commit from the distribution's ``direct_url.json`` (``vcs_info``,
  a ``pip install git+...``), else from a commit the package states in its files
  (``__git_version__``, ``__commit__``, ``git_version`` ... in ``_build_meta.py``, ``version.py``,
  ``__init__.py``), else from a ``+g<commit>`` suffix of its version;
- or with the dependency's ``command`` (a build in the servers' container, a C library), whose
  output is read as the engine build command's is.

The evidence records every build (``dependencies``), the report shows them under Provenance,
`fasttrack merge` refuses parts made with different builds, and a requirement (``version``, a
PEP 440 specifier; ``commit``) the build does not meet makes every check that runs code
``not_run(dependency)`` (``fasttrack.plan.blockers``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

from fasttrack.environment import Environment
from fasttrack.manifest import Manifest
from fasttrack.manifest.sections import Dependency
from fasttrack.targets.build import from_command, parse_build

COMMIT_NAMES = ("__git_version__", "__git_commit__", "__commit__", "__commit_id__", "git_version", "git_commit")
COMMIT_FILES = ("_build_meta.py", "version.py", "_version.py", "__version__.py", "git_version.py", "__init__.py")
_STATED = re.compile(
    r"^\s*(?:" + "|".join(COMMIT_NAMES) + r")\s*(?::\s*str\s*)?=\s*['\"]([0-9a-f]{7,40})['\"]", re.MULTILINE
)
_MAX_FILE_BYTES = 1 << 20


def with_dependencies(env: Environment, manifest: Manifest, path: Sequence[str] | None = None) -> Environment:
    """``env`` with the installed builds of the manifest's dependencies (``env.dependencies``)."""
    deps = manifest.target.dependencies
    return replace(env, dependencies={d.name: read_build(d, manifest.root, path) for d in deps}) if deps else env


def read_build(dep: Dependency, root: Path, path: Sequence[str] | None = None) -> dict[str, Any]:
    """{version, commit, source} of one dependency (``path``: where distributions are looked
    for instead of ``sys.path``); a build that is not there has version None, never an error."""
    if dep.command:
        build = from_command(dep.command, root)
        return {k: v for k, v in build.items() if k != "image_digest"}
    dist = next(
        iter(metadata.distributions(name=dep.name, path=list(path)) if path else metadata.distributions(name=dep.name)),
        None,
    )
    if dist is None:
        return {"version": None, "commit": None, "source": f"importlib.metadata: {dep.name} is not installed"}
    version = dist.version
    commit, where = _vcs_commit(dist)
    if commit is None:
        commit, where = _stated_commit(dist, dep.module)
    if commit is None:
        commit = parse_build(version, "").get("commit")
        where = "its version" if commit else None
    source = f"importlib.metadata: {dist.metadata['Name'] or dep.name} {version}"
    return {"version": version, "commit": commit, "source": source + (f"; commit from {where}" if where else "")}


def _vcs_commit(dist: metadata.Distribution) -> tuple[str | None, str | None]:
    try:
        data = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        return None, None
    vcs = data.get("vcs_info") if isinstance(data, Mapping) else None
    commit = vcs.get("commit_id") if isinstance(vcs, Mapping) else None
    return (str(commit), "direct_url.json") if commit else (None, None)


def _stated_commit(dist: metadata.Distribution, module: str | None) -> tuple[str | None, str | None]:
    """A commit the package's files assign to one of COMMIT_NAMES (read, never imported)."""
    top = module or next(iter((dist.read_text("top_level.txt") or "").split()), None)
    if not top:
        top = next((f.parts[0] for f in dist.files or () if len(f.parts) == 2 and f.name == "__init__.py"), None)
    folder = Path(str(dist.locate_file(top))) if top else None
    if folder is None or not folder.is_dir():
        return None, None
    for name in COMMIT_FILES:
        file = folder / name
        try:
            if not file.is_file() or file.stat().st_size > _MAX_FILE_BYTES:
                continue
            found = _STATED.search(file.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        if found:
            return found.group(1), f"{top}/{name}"
    return None, None


def unmet(dep: Dependency, build: Mapping[str, Any] | None) -> str | None:
    """Why ``build`` does not meet what the manifest requires of ``dep`` (None: it does, or the
    manifest requires nothing of it)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    if not dep.version and not dep.commit:
        return None
    if not build:
        return "its build was not read here"
    if build.get("error"):
        return f"its build could not be read ({build['error']})"
    version, commit = build.get("version"), build.get("commit")
    if dep.version:
        if not version:
            return "it is not installed here" if "not installed" in str(build.get("source")) else "no version was read"
        try:
            if not SpecifierSet(dep.version).contains(Version(str(version)), prereleases=True):
                return f"installed here: {version}"
        except (InvalidSpecifier, InvalidVersion) as err:
            return f"installed here: {version}, which cannot be compared ({err})"
    if dep.commit:
        if not commit:
            return f"installed here: {version or 'no version'}, with no commit to compare"
        short, long = sorted((dep.commit, str(commit)), key=len)
        if len(short) < 7 or not long.startswith(short):
            return f"installed here: commit {commit}"
    return None


def requirement(dep: Dependency) -> str:
    """What the manifest requires of ``dep``, for messages: 'flashinfer-python >=0.3 at 1a2b3c4'."""
    return " ".join(part for part in (dep.name, dep.version, f"at {dep.commit}" if dep.commit else None) if part)


def dependency_record(manifest: Manifest, builds: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The evidence's ``dependencies``: per declared dependency its build as read here, with the
    manifest's requirement (``required``) and, where the build does not meet it, why (``unmet``)."""
    found: dict[str, Any] = {}
    for dep in manifest.target.dependencies:
        build = dict(builds.get(dep.name) or {"version": None, "commit": None, "source": "not read"})
        if dep.version or dep.commit:
            build["required"] = requirement(dep)[len(dep.name) :].strip()
            why = unmet(dep, build)
            if why is not None:
                build["unmet"] = why
        found[dep.name] = build
    return found or None
