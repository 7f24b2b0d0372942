"""fasttrack.fileio: capped reads, the JSON nesting check, atomic writes; a full disk simulated
by making the write fail with ENOSPC (the acceptance test uses a real 64 KiB tmpfs where it can)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from fasttrack import fileio
from fasttrack.errors import EXIT_INCOMPLETE, OutputError, UsageError
from fasttrack.kinds.registry import KINDS


def test_read_capped_stops_at_the_cap_even_on_an_endless_file(tmp_path):
    assert fileio.read_capped(tmp_path.joinpath("a").write_bytes(b"x" * 10) and tmp_path / "a", 10) == b"x" * 10
    with pytest.raises(fileio.InputTooLarge, match="larger than 16 MiB"):
        fileio.read_capped(Path("/dev/zero"), 16 * 1024 * 1024)


@pytest.mark.parametrize("depth, ok", [(fileio.JSON_MAX_DEPTH, True), (fileio.JSON_MAX_DEPTH + 1, False)])
def test_json_depth_is_checked_before_parsing(depth, ok):
    text = ("[" * depth + "]" * depth).encode()
    if ok:
        fileio.check_json_depth(text)
    else:
        with pytest.raises(fileio.TooDeep, match=f"deeper than {fileio.JSON_MAX_DEPTH} levels"):
            fileio.check_json_depth(text)


def test_brackets_inside_strings_do_not_count_and_the_line_is_found():
    fileio.check_json_depth(json.dumps({"s": "[" * 500 + '\\"{' * 300}).encode())
    deep = b'{"a":\n' + b"[" * 200 + b"]" * 200 + b"}"
    with pytest.raises(fileio.TooDeep) as err:
        fileio.check_json_depth(deep)
    assert err.value.line == 2
    fileio.check_json_depth(b"[[[}")  # not JSON at all: left to the parser, which names its line


def _full_disk(monkeypatch, after_bytes: int = 0):
    """Writing fails with ENOSPC once ``after_bytes`` went through (as on a full device)."""
    written = {"n": 0}
    real = fileio._write_fd

    def write(fd, data):
        if written["n"] + len(data) > after_bytes:
            os.close(fd)
            raise OSError(errno.ENOSPC, "No space left on device")
        written["n"] += len(data)
        return real(fd, data)

    monkeypatch.setattr(fileio, "_write_fd", write)


def test_a_full_disk_leaves_every_file_of_the_pair_as_it_was(tmp_path, monkeypatch):
    a, b = tmp_path / "evidence.json", tmp_path / "evidence.json.sha256"
    fileio.atomic_write_all([(a, b"old evidence"), (b, b"old digest")])
    _full_disk(monkeypatch, after_bytes=20)  # the first file fits, the second does not
    with pytest.raises(OutputError) as err:
        fileio.atomic_write_all([(a, b"new evidence!"), (b, b"new digest")])
    assert err.value.exit_code == EXIT_INCOMPLETE
    assert "no space left on the device" in err.value.user_message() and "evidence.json.sha256" in str(err.value)
    assert (a.read_bytes(), b.read_bytes()) == (b"old evidence", b"old digest")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evidence.json", "evidence.json.sha256"]  # no temp left


def test_write_evidence_on_a_full_disk_keeps_the_last_complete_evidence(tmp_path, monkeypatch):
    from fasttrack.evidence import read_evidence, write_evidence
    from fasttrack.verification.verify import VerifyOptions, verify
    from support.paths import ROOT
    from support.planned_evidence import planned_evidence

    ev = planned_evidence(ROOT / "tests" / "fixtures" / "faults" / "base" / "fasttrack.yaml")
    path = tmp_path / "out" / "evidence.json"
    write_evidence(ev, path)
    before = path.read_bytes()
    _full_disk(monkeypatch)
    with pytest.raises(OutputError):
        write_evidence(ev.with_checks(ev.checks[:1]), path)
    monkeypatch.undo()
    assert path.read_bytes() == before and read_evidence(path).checks == ev.checks
    assert {f.name: f.ok for f in verify(VerifyOptions(path), KINDS).findings}["digest"]


def test_an_unwritable_folder_is_a_usage_error_naming_the_option(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="--out .*file/sub: cannot write there: Not a directory"):
        fileio.require_writable(tmp_path / "file" / "sub", "--out")
    with pytest.raises(UsageError, match="File name too long"):
        fileio.require_writable(tmp_path / ("a" * 300), "--out")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(UsageError, match="Too many levels of symbolic links"):
        fileio.require_writable(loop, "--out")
