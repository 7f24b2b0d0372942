"""The files the gate's answer depends on: reading inputs with caps, writing outputs atomically.

Reading: a manifest or an evidence file is read with a size cap (``MANIFEST_MAX_BYTES``,
``EVIDENCE_MAX_BYTES``), so ``fasttrack validate /dev/zero`` stops at the cap instead of growing
until the OOM killer ends it, and JSON is checked for its nesting depth (``JSON_MAX_DEPTH``)
before Python's parser recurses into it. The YAML loader checks its own depth
(``fasttrack.manifest.yaml_loader``).

Writing: ``atomic_write`` writes a temporary file in the same folder, fsyncs it and renames it
over the target, so a reader sees the old file or the new one, never half of one; a full disk
leaves the previous file intact. ``atomic_write_all`` does the same for files that belong
together (evidence and its digest sidecar): every temporary file is written and fsynced before
the first rename, so a full disk replaces none of them.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from fasttrack.errors import OutputError, UsageError

MANIFEST_MAX_BYTES = 16 * 1024 * 1024  # a manifest is a few kB; 16 MiB is far above any real one
EVIDENCE_MAX_BYTES = 64 * 1024 * 1024  # the largest real run's evidence is a few MB
SIDECAR_MAX_BYTES = 64 * 1024  # digest sidecars and attestations
JSON_MAX_DEPTH = 128  # evidence nests about 10 levels, plus the manifest copy (64 at most)


class InputTooLarge(ValueError):
    """A file larger than the cap for its kind."""

    def __init__(self, path: Path, limit: int):
        self.path, self.limit = Path(path), limit
        super().__init__(f"larger than {describe_bytes(limit)}, the most fasttrack reads")


class TooDeep(ValueError):
    """JSON nested deeper than the cap (checked before the parser recurses)."""

    def __init__(self, limit: int, line: int):
        self.limit, self.line = limit, line
        super().__init__(f"nested deeper than {limit} levels (line {line})")


WriteFailed = OutputError  # an output could not be written: exit 3, the previous file intact


def describe_bytes(n: int) -> str:
    if n >= 1024 * 1024 and n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


def read_capped(path: Path, limit: int) -> bytes:
    """The file's bytes; InputTooLarge when it holds more than ``limit`` bytes (it never reads
    more than ``limit + 1``, so endless files such as /dev/zero are fine). OSError as usual."""
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputTooLarge(Path(path), limit)
    return data


_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}")


def check_json_depth(raw: bytes, limit: int = JSON_MAX_DEPTH) -> None:
    """TooDeep when ``raw`` (JSON text) nests arrays/objects deeper than ``limit``. Linear in C
    (strings removed, brackets kept, innermost pairs peeled once per level), no recursion."""
    brackets = _outside_strings(raw).translate(None, _NOT_BRACKET)
    for _level in range(limit):
        if not brackets:
            return
        peeled = _INNERMOST.sub(b"", brackets)
        if len(peeled) == len(brackets):
            return  # unbalanced: not JSON at all, which the parser will say with its own line
        brackets = peeled
    if brackets:
        raise TooDeep(limit, _line_beyond(raw, limit))


def _outside_strings(raw: bytes) -> bytes:
    """The JSON text with its strings taken out: escaped backslashes, then escaped quotes, go
    first, so every quote left opens or closes a string; the parts between pairs are outside."""
    return b"".join(raw.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')[0::2])


def _line_beyond(raw: bytes, limit: int) -> int:
    """The line where the nesting first exceeds ``limit`` (error path only)."""
    depth, line, in_string, escaped = 0, 1, False, False
    for byte in raw:
        if byte == 0x0A:
            line += 1
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in b"[{":
            depth += 1
            if depth > limit:
                return line
        elif byte in b"]}":
            depth -= 1
    return line


def probe_writable(folder: Path) -> None:
    """Create ``folder`` (and parents) and write and remove a file in it; OSError when that fails
    (read-only, a name too long, a symlink loop, a file in the way)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if not folder.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(folder))
    fd, tmp = tempfile.mkstemp(prefix=".fasttrack-write-test.", dir=folder)
    os.close(fd)
    os.unlink(tmp)


def require_writable(folder: Path, option: str) -> None:
    """A usage error (exit 2) naming ``option`` when ``folder`` cannot be created and written in."""
    try:
        probe_writable(folder)
    except (NotADirectoryError, FileExistsError):
        try:
            os.stat(folder)  # a symlink loop or a link to nowhere says so here
        except OSError as err:
            raise UsageError(f"{option} {folder}: cannot write there: {_why(err)}") from None
        raise UsageError(f"{option} {folder}: exists and is not a folder (or a parent of it is a file)") from None
    except OSError as err:
        raise UsageError(f"{option} {folder}: cannot write there: {_why(err)}") from None


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, fsync, rename)."""
    atomic_write_all([(Path(path), data)])


def atomic_write_all(files: Sequence[tuple[Path, bytes]]) -> None:
    """Write several files so that either all are replaced or none is: all temporary files are
    written and fsynced first, then renamed in order. Raises WriteFailed naming the file."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, data in files:
            path = Path(path)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=".tmp", dir=path.parent)
            except OSError as err:
                raise WriteFailed(err.errno, _why(err), str(path)) from None
            staged.append((tmp, path))
            try:
                os.fchmod(fd, published_mode())  # mkstemp's 0600 would hide reports from a web server
                _write_fd(fd, data)
            except OSError as err:
                raise WriteFailed(err.errno, _why(err), str(path)) from None
        for tmp, path in staged:
            try:
                os.replace(tmp, path)
            except OSError as err:
                raise WriteFailed(err.errno, _why(err), str(path)) from None
        staged = []
    finally:
        for tmp, _path in staged:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def published_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give: 0666 less the umask (0644 under the usual
    022), read from /proc where Linux has it (setting the umask to read it races other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _write_fd(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, fsync it and close it (ENOSPC shows here or at fsync)."""
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _why(err: OSError) -> str:
    if err.errno == errno.ENOSPC:
        return "no space left on the device"
    if err.errno == errno.EDQUOT:
        return "disk quota exceeded"
    return err.strerror or str(err)
