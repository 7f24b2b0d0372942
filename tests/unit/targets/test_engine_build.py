"""The engine build in the evidence: parsed from a declared command or a server's /version,
recorded per side, conflicts within a run kept, and `fasttrack merge` refusing parts of
different builds."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from fasttrack.engine.execute import BuildLog
from fasttrack.engine.merge import merge_evidence
from fasttrack.errors import UsageError
from fasttrack.kinds.registry import KINDS
from fasttrack.targets.build import from_command, from_server, parse_build, read_sides, write_side
from fasttrack.targets.openai.server import ManagedServer, ServerSpec
from support import evidence_fixtures
from support.paths import SUPPORT

SHA = "0123456789abcdef0123456789abcdef01234567"
DIGEST = "sha256:" + "ab" * 32


def test_builds_are_read_from_text_and_json():
    assert parse_build("0.11.1.dev12+g1a2b3c4d\n", "s") == {
        "version": "0.11.1.dev12+g1a2b3c4d",
        "commit": "1a2b3c4d",  # vLLM's dev versions end in +g<commit>
        "image_digest": None,
        "source": "s",
    }
    text = parse_build(f"vllm/vllm-openai@{DIGEST} built from {SHA} (vllm 0.12.0)", "s")
    assert (text["version"], text["commit"], text["image_digest"]) == ("0.12.0", SHA, DIGEST)
    as_json = parse_build(f'{{"version": "0.12.0", "commit": "{SHA}", "image_digest": "{DIGEST}"}}', "s")
    assert (as_json["version"], as_json["commit"], as_json["image_digest"]) == ("0.12.0", SHA, DIGEST)


def test_a_declared_command_is_run_and_a_failing_one_recorded(tmp_path):
    ok = from_command([sys.executable, "-c", "print('engine 2.3.4')"], tmp_path)
    assert ok["version"] == "2.3.4" and ok["source"].startswith("command: ")
    bad = from_command([sys.executable, "-c", "raise SystemExit(4)"], tmp_path)
    assert bad["version"] is None and bad["error"].startswith("exit 4")


def test_a_servers_version_is_read_and_kept_per_side(tmp_path):
    command = (
        sys.executable,
        str(SUPPORT / "fake_openai_server.py"),
        "--port",
        "{port}",
        "--version",
        "0.9.0+gdeadbee",
    )
    with ManagedServer(ServerSpec("candidate", command=command), tmp_path) as server:
        build = from_server(str(server.base_url))
    assert build is not None and (build["version"], build["commit"]) == ("0.9.0+gdeadbee", "deadbee")
    write_side(tmp_path / "a", "candidate", build)
    assert read_sides(tmp_path / "a") == {"candidate": build}
    without = (sys.executable, str(SUPPORT / "fake_openai_server.py"), "--port", "{port}")
    with ManagedServer(ServerSpec("baseline", command=without), tmp_path) as server:
        assert from_server(str(server.base_url)) is None  # no /version: nothing claimed


def test_a_run_whose_server_changes_build_records_the_conflict():
    log = BuildLog({"version": "1.0", "commit": None, "image_digest": None, "source": "command"})
    log.add("a", {"candidate": {"version": "1.0", "commit": "x", "image_digest": None}})
    log.add("b", {"candidate": {"version": "1.1", "commit": "y", "image_digest": None}})
    record = log.record()
    assert record["declared"]["version"] == "1.0" and record["candidate"]["version"] == "1.0"
    assert record["conflicts"][0]["check"] == "b"


def test_merge_refuses_parts_made_with_different_builds():
    first = evidence_fixtures.build_evidence("kimi-k3-latency", "pass")
    a = replace(first, engine_build={"candidate": {"version": "0.12.0", "commit": SHA, "image_digest": None}})
    b = replace(
        a,
        run=replace(a.run, id="other"),
        engine_build={"candidate": {"version": "0.11.0", "commit": None, "image_digest": None}},
    )
    with pytest.raises(UsageError, match="different engine builds"):
        merge_evidence([a, b])
    cpu_part = replace(a, run=replace(a.run, id="cpu"), engine_build=None)  # a part that started no server
    assert merge_evidence([a, cpu_part]).engine_build["candidate"]["version"] == "0.12.0"


def test_the_report_shows_the_build_in_its_provenance():
    from fasttrack.report.html import render_html

    evidence = evidence_fixtures.build_evidence("kimi-k3-latency", "pass").to_dict()
    evidence["engine_build"] = {
        "declared": {"version": "0.12.0", "commit": SHA, "image_digest": None, "source": "command: x"}
    }
    html = render_html(evidence, "0" * 64, kinds=KINDS)
    assert f"engine build (declared)</dt><dd>version 0.12.0, commit {SHA}" in html
    assert "engine build</dt><dd>not recorded" in render_html(
        evidence_fixtures.build_evidence("kimi-k3-latency", "pass").to_dict(), "0" * 64, kinds=KINDS
    )


def test_evidence_keeps_the_build_through_a_round_trip(tmp_path):
    from fasttrack.evidence import read_evidence, write_evidence

    ev = replace(
        evidence_fixtures.build_evidence("kimi-k3-latency", "pass"),
        engine_build={"declared": {"version": "1", "source": "c"}},
    )
    write_evidence(ev, tmp_path / "evidence.json")
    assert read_evidence(Path(tmp_path / "evidence.json")).engine_build == {"declared": {"version": "1", "source": "c"}}


def test_a_check_run_records_the_declared_build_in_its_evidence(tmp_path):
    from fasttrack.engine.run import CheckOptions, run_check
    from fasttrack.selection import Selection
    from support.projects import git, materialise

    project = materialise(tmp_path / "toy")
    manifest = project / "fasttrack.yaml"
    manifest.write_text(
        manifest.read_text().replace(
            '  python: {factory: "toy.target:create", path: "."}',
            '  python: {factory: "toy.target:create", path: "."}\n'
            f"  engine_build: {{command: [{sys.executable}, -c, \"print('toy-engine 3.1.4')\"]}}",
        )
    )
    git(project, "commit", "-qam", "declare the build")
    result = run_check(
        CheckOptions(str(manifest), tmp_path / "out", selection=Selection(only=("scope_diff",)), quiet=True), KINDS
    )
    assert result.evidence.engine_build["declared"]["version"] == "3.1.4"
