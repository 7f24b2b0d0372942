"""render_all, and the outputs `fasttrack check` and `merge` write after the run."""

from __future__ import annotations

import shutil

from fasttrack.cli.outputs import write_outputs
from fasttrack.evidence import read_evidence, write_evidence
from fasttrack.kinds.registry import KINDS
from fasttrack.report.render import render_all
from fasttrack.verification.verify import VerifyOptions, verify
from support.paths import ROOT
from support.planned_evidence import planned_evidence

KIMI = ROOT / "examples" / "kimi-k3-latency" / "fasttrack.yaml"


def test_render_all_writes_reports_and_an_attestation_that_verifies(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("BUILDKITE", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    run = tmp_path / "out"
    write_evidence(planned_evidence(KIMI), run / "evidence.json")  # a lab run's evidence: it verifies
    rendered = write_outputs(
        read_evidence(run / "evidence.json"), run / "evidence.json", run, reports=True, kinds=KINDS
    )
    assert rendered.verdict == "PASS" and rendered.annotations == ()
    assert rendered.summary.startswith("fasttrack ") and (run / "summary.txt").read_text() == rendered.summary
    for name in ("report.html", "summary.md", "junit.xml", "evidence.json.sha256", "attestation.intoto.json"):
        assert (run / name).is_file(), name
    assert verify(VerifyOptions(run / "evidence.json"), KINDS).ok


def test_render_all_annotates_under_github(fixture_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary"))
    run = tmp_path / "out"
    shutil.copytree(fixture_dir / "fail", run)
    assert render_all(run / "evidence.json", run, kinds=KINDS).annotations == ("github",)
    assert capsys.readouterr().out.count("::error title=") == 8
    assert "fasttrack: FAIL" in (tmp_path / "summary").read_text()


def test_without_reports_only_the_summary_is_written(fixture_dir, tmp_path):
    run = tmp_path / "out"
    shutil.copytree(fixture_dir / "fail", run)
    rendered = render_all(run / "evidence.json", run, reports=False, kinds=KINDS)
    assert rendered.paths == () and (run / "summary.txt").read_text() == rendered.summary
    assert not (run / "report.html").exists() and not (run / "attestation.intoto.json").exists()
