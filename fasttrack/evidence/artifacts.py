"""Artifact files of untrusted evidence: their paths confined to the evidence folder, their bytes
read without following a symbolic link anywhere on the way, and checked against the recorded
sha256 and size.

An artifact path is relative, POSIX, and stays inside the folder: no leading ``/``, no ``..`` or
empty component, no backslash or NUL (``path_problem``; the reader refuses evidence with such a
path, naming its JSON path). Opening walks the path one component at a time from the folder
with ``O_NOFOLLOW`` (``open_artifact``), so a symlink in a part's ``artifacts/`` (``leak ->
~/.ssh/id_ed25519``) or a linked folder on the way is refused, never read or copied.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from fasttrack.fileio import published_mode

_CHUNK = 1 << 20


def path_problem(path: object) -> str | None:
    """Why ``path`` is not an artifact path confined to the evidence folder (None: it is)."""
    if not isinstance(path, str) or not path:
        return "an artifact path must be a non-empty string"
    if path.startswith("/"):
        return f"artifact path {path!r} is absolute: artifacts are stored inside the evidence folder"
    if "\\" in path or "\x00" in path:
        return f"artifact path {path!r} holds a backslash or NUL: POSIX separators only"
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return f"artifact path {path!r} has an empty, '.' or '..' component: it must stay inside the evidence folder"
    return None


def artifact_path_problems(data: Mapping[str, Any]) -> list[str]:
    """Every artifact path of evidence ``data`` that leaves its folder, with its JSON path."""
    problems = []
    for n, check in enumerate(data.get("checks") or ()):
        if not isinstance(check, Mapping):
            continue
        for m, artifact in enumerate(check.get("artifacts") or ()):
            why = path_problem(artifact.get("path") if isinstance(artifact, Mapping) else None)
            if why:
                problems.append(f"$.checks[{n}].artifacts[{m}].path: {why}")
    return problems


class ArtifactUnreadable(OSError):
    """An artifact that is missing, not a regular file, or reached through a symbolic link."""


@contextmanager
def open_artifact(folder: Path, path: str) -> Iterator[BinaryIO]:
    """The artifact file opened for reading, every component opened with O_NOFOLLOW from
    ``folder``: ArtifactUnreadable when a component is a symlink, the file is not a regular
    file, or the path leaves the folder."""
    why = path_problem(path)
    if why:
        raise ArtifactUnreadable(why)
    parts = path.split("/")
    fds: list[int] = []
    try:
        fds.append(os.open(folder, os.O_RDONLY | os.O_DIRECTORY))
        for part in parts[:-1]:
            fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fds[-1])
    except OSError as err:
        raise ArtifactUnreadable(f"{path}: {_why(err)}") from None
    finally:
        for opened in fds:
            os.close(opened)
    import stat

    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ArtifactUnreadable(f"{path}: not a regular file")
    with os.fdopen(fd, "rb") as fh:
        yield fh


def _why(err: OSError) -> str:
    import errno

    if err.errno in (errno.ELOOP, errno.ENOTDIR):
        return "reached through a symbolic link (or a file where a folder should be), which is never followed"
    if err.errno == errno.ENOENT:
        return "missing"
    return err.strerror or str(err)


@dataclass(frozen=True)
class ArtifactCheck:
    path: str
    problem: str | None  # None: the file's bytes are the recorded ones


def check_artifact(folder: Path, artifact: Mapping[str, Any], copy_to: BinaryIO | None = None) -> ArtifactCheck:
    """Whether the artifact's file has the recorded sha256 and size (streamed; with ``copy_to``,
    its bytes are written there as they are read)."""
    path = str(artifact.get("path"))
    digest, size = hashlib.sha256(), 0
    try:
        with open_artifact(folder, path) as fh:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
                size += len(chunk)
                if copy_to is not None:
                    copy_to.write(chunk)
    except ArtifactUnreadable as err:
        return ArtifactCheck(path, str(err))
    if digest.hexdigest() != artifact.get("sha256") or size != artifact.get("bytes"):
        return ArtifactCheck(
            path,
            f"{path}: sha256 {digest.hexdigest()[:16]}… ({size} bytes) is not the recorded "
            f"{str(artifact.get('sha256'))[:16]}… ({artifact.get('bytes')} bytes): the file was replaced",
        )
    return ArtifactCheck(path, None)


def artifact_problems(data: Mapping[str, Any], folder: Path) -> list[str]:
    """Every artifact of evidence ``data`` (in ``folder``) that is missing, linked, or changed."""
    seen: set[str] = set()
    problems = []
    for check in data.get("checks") or ():
        for artifact in check.get("artifacts") or ():
            if artifact.get("path") in seen:
                continue
            seen.add(str(artifact.get("path")))
            found = check_artifact(folder, artifact)
            if found.problem:
                problems.append(found.problem)
    return problems


def copy_artifact(source: Path, artifact: Mapping[str, Any], out_dir: Path) -> str | None:
    """Copy the artifact from folder ``source`` to the same path under ``out_dir`` when its bytes
    are the recorded ones: read with ``open_artifact``, written to a temporary file renamed into
    place (a symlink planted at the target is replaced, never written through), in folders made
    here that must not be symlinks. Returns the problem, None when copied (or already there)."""
    import tempfile

    path = str(artifact.get("path"))
    if path_problem(path) is None and check_artifact(out_dir, artifact).problem is None:
        return None  # already in place as recorded (the same folder, or a part copied it)
    try:
        target_dir = _inner_folder(out_dir, path.split("/")[:-1])
        fd, tmp = tempfile.mkstemp(prefix=".artifact.", dir=target_dir)
        os.fchmod(fd, published_mode())
    except (OSError, ArtifactUnreadable) as err:
        return f"cannot write {path} under {out_dir}: {err}"
    try:
        with os.fdopen(fd, "wb") as out:
            found = check_artifact(source, artifact, copy_to=out)
        if found.problem is None:
            os.replace(tmp, target_dir / path.split("/")[-1])
            return None
        return found.problem
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _inner_folder(root: Path, parts: list[str]) -> Path:
    """``root/parts...``, made as needed; ArtifactUnreadable when one of them is a symlink."""
    folder = Path(root)
    for part in parts:
        folder = folder / part
        try:
            os.mkdir(folder)
        except FileExistsError:
            if os.path.islink(folder) or not folder.is_dir():
                raise ArtifactUnreadable(f"{folder} is a symbolic link or not a folder") from None
    return folder
