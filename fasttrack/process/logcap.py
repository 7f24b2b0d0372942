"""A check's output log kept to a bounded size: a test that prints a gigabyte leaves a log of
``LOG_MAX_BYTES`` — its first ``HEAD_BYTES`` and its last bytes (where the failure and pytest's
summary are), with one line in between saying how many bytes were printed and how many were cut.
Streamed in chunks, so memory stays small whatever the output was."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

LOG_MAX_BYTES = 8 * 1024 * 1024
HEAD_BYTES = 64 * 1024
_CHUNK = 1 << 20


def cap_log(path: Path, limit: int = LOG_MAX_BYTES, head: int = HEAD_BYTES) -> int:
    """Cut the middle out of the log at ``path`` when it holds more than ``limit`` bytes; returns
    the number of bytes the process printed (the file's size before the cut)."""
    path = Path(path)
    size = path.stat().st_size
    if size <= limit:
        return size
    tail = limit - head
    note = f"\n[fasttrack: the output was {size} bytes; {size - head - tail} bytes after the first {head} are cut, the last {tail} are kept]\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:40]}.", dir=path.parent)
    try:
        with open(path, "rb") as src, os.fdopen(fd, "wb") as out:
            out.write(src.read(head))
            out.write(note.encode())
            src.seek(size - tail)
            while chunk := src.read(_CHUNK):
                out.write(chunk)
        os.chmod(tmp, os.stat(path).st_mode & 0o777)
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return size


def read_tail(path: Path, max_chars: int) -> str:
    """The last ``max_chars`` characters of a log, reading only its end."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 4 * max_chars))
            return fh.read().decode("utf-8", errors="replace")[-max_chars:]
    except OSError:
        return ""
