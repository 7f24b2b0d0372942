"""`fasttrack report` and `fasttrack dashboard` from the command line."""

from __future__ import annotations

import subprocess
import sys


def fasttrack(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fasttrack", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_report_writes_the_three_files(fixture_dir, tmp_path):
    proc = fasttrack(
        "report",
        str(fixture_dir / "fail" / "evidence.json"),
        "--html",
        str(tmp_path / "r.html"),
        "--md",
        str(tmp_path / "s.md"),
        "--junit",
        str(tmp_path / "j.xml"),
        "--no-annotate",
    )
    assert proc.returncode == 0, proc.stderr
    assert "verdict: FAIL" in proc.stderr
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert (tmp_path / "s.md").read_text().startswith("## ❌ fasttrack: FAIL")
    assert (tmp_path / "j.xml").read_bytes().startswith(b"<?xml")


def test_report_on_bad_evidence_is_exit_2(tmp_path):
    bad = tmp_path / "evidence.json"
    bad.write_text('{"version": 1}')
    proc = fasttrack("report", str(bad))
    assert proc.returncode == 2
    assert "evidence does not match the evidence schema" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_dashboard_command(history_dir, tmp_path):
    proc = fasttrack("dashboard", str(history_dir), "-o", str(tmp_path / "site"))
    assert proc.returncode == 0, proc.stderr
    assert "3 optimisations, 12 runs" in proc.stderr
    assert (tmp_path / "site" / "index.html").is_file()
