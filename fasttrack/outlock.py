"""One run per output folder: an exclusive ``flock`` on ``OUT/.fasttrack.lock``, so that two
`fasttrack check` (or `merge`) into one ``--out`` cannot clobber each other's evidence and
artifacts. The second exits 2 naming the holder (its pid and command, which the holder writes into
the lock file). The kernel drops the lock when the holder's process ends, however it ends, so a
killed run never leaves a stale lock; within one process taking the lock again is a no-op."""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

from fasttrack.errors import UsageError

LOCK_NAME = ".fasttrack.lock"
_HELD: dict[str, int] = {}  # realpath of the folder -> the descriptor holding its lock


def lock_out(folder: Path, option: str = "--out") -> None:
    """Take the folder's lock for this process (made by `require_writable` already) or exit 2
    naming the run that holds it."""
    key = os.path.realpath(folder)
    if key in _HELD:
        return
    path = Path(folder) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:
        raise UsageError(f"{option} {folder}: cannot take its lock {LOCK_NAME}: {err.strerror or err}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise UsageError(
            f"{option} {folder} is in use by another fasttrack run ({holder}); two runs into one folder would "
            "overwrite each other's evidence: wait for it to end or give another --out"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()}: {' '.join(['fasttrack', *sys.argv[1:]])[:500]}\n".encode(errors="replace"))
    _HELD[key] = fd


def release_out(folder: Path) -> None:
    """Drop this process's lock on the folder (the lock file stays: removing it would race)."""
    fd = _HELD.pop(os.path.realpath(folder), None)
    if fd is not None:
        os.close(fd)


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 600, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "holder unknown"
