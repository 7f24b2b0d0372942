"""Exit codes at the edges: `verify` tells an undecided evidence (3) from a failed or broken one
(1); a closed stdout or stderr pipe (`fasttrack check ... | head -2`) keeps the verdict's exit
code and prints no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fasttrack.attest import attest
from fasttrack.cli.verify import exit_code
from fasttrack.evidence import write_evidence
from support.paths import ROOT
from support.planned_evidence import narrowed, planned_evidence

MINI = ROOT / "examples" / "mini-k3" / "fasttrack.yaml"  # cpu and one H200


def fasttrack(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fasttrack", *args], capture_output=True, text=True, timeout=120, cwd=ROOT, **kw
    )


def attested(tmp_path: Path, mode: str, name: str | None = None, **selection: object) -> Path:
    """An attested evidence of the example's manifest (every planned outcome, measurements that
    re-derive): pass, fail, or incomplete (one outcome not run); with ``selection``, a partial
    run (``hardware=("cpu",)``)."""
    ev = planned_evidence(MINI, mode=mode)
    if selection:
        ev = narrowed(ev, **selection)
    path = tmp_path / (name or mode) / "evidence.json"
    write_evidence(ev, path)
    attest(path)
    return path


def test_verify_exit_codes_tell_undecided_from_failed_and_broken(tmp_path):
    incomplete = attested(tmp_path, "incomplete")
    done = fasttrack("verify", str(incomplete))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "not verified (incomplete): verdict is INCOMPLETE" in done.stderr
    # INCOMPLETE is labelled as such (not FAIL), with the grouped reasons `check` prints, once each.
    assert "INCOMPLETE verdict: verdict is INCOMPLETE" in done.stdout
    assert "FAIL verdict" not in done.stdout
    from fasttrack.evidence import read_evidence_dict
    from fasttrack.kinds.registry import KINDS
    from fasttrack.report.reasons import first_screen

    grouped = first_screen(read_evidence_dict(incomplete, kinds=KINDS), KINDS).lines()[1:]
    assert grouped and all(done.stdout.count(line) == 1 for line in grouped)
    assert "every declared accelerator" not in done.stdout
    assert fasttrack("verify", str(attested(tmp_path, "fail"))).returncode == 1
    assert fasttrack("verify", str(attested(tmp_path, "pass"))).returncode == 0
    partial = attested(tmp_path, "pass", "partial", hardware=("cpu",))
    assert fasttrack("verify", str(partial)).returncode == 3  # intact PASS of part of the scope: undecided
    assert fasttrack("verify", str(partial), "--allow-partial").returncode == 0
    # Broken: an INCOMPLETE evidence edited after it was attested is not "incomplete", it is broken.
    data = incomplete.read_bytes()
    incomplete.write_bytes(data.replace(b'"state": "complete"', b'"state": "complete" ', 1))
    assert fasttrack("verify", str(incomplete)).returncode == 1
    assert fasttrack("verify", str(tmp_path / "missing.json")).returncode == 2


@pytest.mark.parametrize(
    "status, failed, code",
    [
        ("INCOMPLETE", ["verdict"], 3),
        ("PASS", ["whole-scope"], 3),
        ("INCOMPLETE", ["verdict", "whole-scope"], 3),
        ("FAIL", ["verdict"], 1),
        ("INCOMPLETE", ["verdict", "digest"], 1),
        ("INCOMPLETE", ["verdict", "a-finding-added-later"], 1),
    ],
)
def test_verify_exit_code_mapping(status, failed, code):
    assert exit_code(status, failed) == code


def closed_pipe() -> int:
    """A pipe whose reader is gone: every write to it fails at once (EPIPE), whatever the timing."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    return write_end


@pytest.mark.parametrize("which", ["stdout", "both"])
def test_a_closed_pipe_keeps_the_exit_code_and_prints_no_traceback(tmp_path, which):
    out = closed_pipe()
    err_file = tmp_path / "stderr.txt"
    with open(err_file, "w") as err:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "fasttrack",
                "check",
                "examples/kimi-k3-latency/fasttrack.yaml",
                "--no-reports",
                "--out",
                str(tmp_path / "k"),
            ],
            stdout=out,
            stderr=out if which == "both" else err,
            cwd=ROOT,
            timeout=120,
        )
    os.close(out)
    assert done.returncode == 3  # INCOMPLETE here, as with an open stdout
    assert (tmp_path / "k" / "evidence.json").is_file()
    if which == "stdout":
        text = err_file.read_text()
        assert "Traceback" not in text and "BrokenPipe" not in text and "Exception ignored" not in text
        assert "[1/" in text  # progress still reached the open stderr
