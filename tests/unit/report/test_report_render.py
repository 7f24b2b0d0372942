"""render_all: what `fasttrack check` calls at the end."""

from __future__ import annotations

import shutil

from fasttrack.report.render import render_all
from fasttrack.verify import VerifyOptions, verify


def test_render_all_writes_reports_and_an_attestation_that_verifies(fixture_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("BUILDKITE", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    run = tmp_path / "out"
    shutil.copytree(fixture_dir / "pass", run)
    rendered = render_all(run / "evidence.json", run)
    assert rendered.verdict == "PASS" and rendered.annotations == ()
    for name in ("report.html", "summary.md", "junit.xml", "evidence.json.sha256", "attestation.intoto.json"):
        assert (run / name).is_file(), name
    assert verify(VerifyOptions(run / "evidence.json")).ok


def test_render_all_annotates_under_github(fixture_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary"))
    run = tmp_path / "out"
    shutil.copytree(fixture_dir / "fail", run)
    assert render_all(run / "evidence.json", run).annotations == ("github",)
    assert capsys.readouterr().out.count("::error title=") == 8
    assert "fasttrack: FAIL" in (tmp_path / "summary").read_text()
