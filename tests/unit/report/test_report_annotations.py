"""CI annotations: GitHub workflow commands (escaped, capped) and Buildkite's agent when present."""

from __future__ import annotations

import os
import stat

from fasttrack.report.annotations import MAX_GITHUB, emit, github_lines


def test_github_errors_for_failures_only_under_actions(load):
    evidence, _ = load("fail")
    out: list[str] = []
    assert emit(evidence, "md", echo=out.append, env={}) == []
    assert out == []
    assert emit(evidence, "md", echo=out.append, env={"GITHUB_ACTIONS": "true"}) == ["github"]
    assert len(out) == evidence["verdict"]["counts"]["failed"]
    assert all(line.startswith("::error title=fasttrack failed%3A ") for line in out)


def test_github_lines_escape_newlines_and_cap_at_fifty(load):
    evidence, _ = load("incomplete")
    evidence["checks"] = [
        dict(evidence["checks"][1], id=f"switch/x{i}", status="errored", reason="line1\nline2 100%") for i in range(80)
    ]
    lines = github_lines(evidence)
    assert len(lines) == MAX_GITHUB
    assert "line1%0Aline2 100%25" in lines[0]
    assert all("\n" not in line for line in lines)


def test_not_run_is_a_warning(load):
    evidence, _ = load("incomplete")
    lines = github_lines(evidence)
    assert any(line.startswith("::warning ") for line in lines)
    assert lines[0].startswith("::error ")  # errored outcomes come first


def test_buildkite_agent_annotates_when_present(load, tmp_path, monkeypatch):
    record = tmp_path / "calls.txt"
    agent = tmp_path / "buildkite-agent"
    agent.write_text(f'#!/bin/sh\necho "$@" > {record}\ncat >> {record}\n')
    agent.chmod(agent.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    evidence, _ = load("fail")
    done = emit(evidence, "## summary body", echo=lambda s: None, env={"BUILDKITE": "true"})
    assert done == ["buildkite:error"]
    args, body = record.read_text().split("\n", 1)
    assert args == "annotate --style error --context fasttrack"
    assert body == "## summary body"


def test_buildkite_without_agent_is_silent(load, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    evidence, _ = load("fail")
    assert emit(evidence, "x", echo=lambda s: None, env={"BUILDKITE": "true"}) == []
