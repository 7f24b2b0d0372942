"""#20 rows 5 and 11: what a target lacks or does wrong is said, in the evidence and on screen."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.projects import materialise


def check(project: Path, out: Path, *args: str) -> tuple[int, dict, str]:
    done = subprocess.run(
        [sys.executable, "-m", "fasttrack", "check", "fasttrack.yaml", "--out", str(out), *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.returncode, json.loads((out / "evidence.json").read_text()), done.stdout


@pytest.mark.slow
def test_a_server_without_tokenize_is_named_not_a_key_error(tmp_path):
    """Row 11: against the toy server (no /tokenize, no /v1/models, bare completions)."""
    project = materialise(tmp_path / "p", "openai_server_no_tokenize")
    code, evidence, stdout = check(project, tmp_path / "out", "--only", "features")
    features = {c["name"]: c for c in evidence["checks"] if c["kind"] == "features"}
    assert code in (1, 3) and all("KeyError" not in (c["reason"] or "") for c in features.values())
    full = features["full_context"]
    assert (full["status"], full["reason_code"]) == ("not_run", "dependency")
    assert "answered POST /tokenize without a 'tokens' list of token ids" in full["reason"]
    assert "does not serve vLLM's /tokenize" in full["reason"]
    structured = features["structured_output"]
    assert structured["status"] == "errored" and "answered a choice without 'message'" in structured["reason"]


@pytest.mark.slow
def test_errored_and_not_run_reasons_reach_stdout_and_summary(tmp_path):
    """Row 5: outcomes errored or not run for a target, hardware or dependency reason are named
    on screen and in summary.txt, not only failures."""
    out = tmp_path / "out"
    code, evidence, stdout = check(materialise(tmp_path / "p", "openai_server"), out)
    summary = (out / "summary.txt").read_text()
    unfinished = [
        c
        for c in evidence["checks"]
        if c["required"]
        and c["status"] in ("errored", "not_run")
        and c["reason_code"] in ("target", "hardware", "dependency")
    ]
    assert unfinished, "the fixture must leave something errored or not run"
    for c in unfinished:
        name = f"{c['kind']}/{c['name']}"
        assert name in stdout and c["reason_code"] in stdout, (name, stdout)
        assert name in summary and c["reason_code"] in summary, (name, summary)
