"""Adding a check kind is one folder and one registry line, and so is adding a target kind
(CONTRIBUTING.md): the test-only kind `support.parrot_kind` and target `support.parrot_target` are
such folders, and the lines below are their registry lines. Nothing in fasttrack/ names them, and
they plan, run, record typed measurements, verify, show in the reports and open sides like the
built-in ones."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fasttrack.cli.options import parse_kinds
from fasttrack.engine.run import CheckOptions, run_check
from fasttrack.errors import EvidenceError
from fasttrack.evidence import Status, read_evidence_dict
from fasttrack.kinds.registry import KINDS
from fasttrack.kinds.switch.run import exercise
from fasttrack.manifest import load_manifest
from fasttrack.report.render import render_reports
from fasttrack.resources import evidence_schema
from fasttrack.selection import Selection
from fasttrack.targets.protocol import PathReporting, Target
from fasttrack.targets.registry import TARGET_KINDS
from fasttrack.targets.sides import opened_pair
from fasttrack.verification import rederive
from fasttrack.verification.verify import VerifyOptions, verify
from support import parrot_kind, parrot_target
from support.paths import ROOT
from support.projects import materialise

WITH_PARROT = {**KINDS, "parrot": parrot_kind.KIND}  # the kind's one registry line
TARGETS_WITH_PARROT = {**TARGET_KINDS, "parrot": parrot_target.KIND}  # the target kind's one registry line


@pytest.fixture
def echoed(tmp_path):
    """A run of the fixture project's parrot checks only, with the registry that has the kind."""
    project = materialise(tmp_path / "toy")
    options = CheckOptions(
        manifest=str(project / "fasttrack.yaml"),
        out_dir=tmp_path / "out",
        quiet=True,
        selection=Selection(only=parse_kinds(["parrots"], "--only", WITH_PARROT)),  # its alias
    )
    result = run_check(options, WITH_PARROT)
    return project, result, tmp_path / "out" / "evidence.json"


def test_a_kind_added_in_its_folder_plans_runs_verifies_and_reports(echoed, tmp_path):
    project, result, path = echoed
    parrots = [c for c in result.evidence.checks if c.kind == "parrot"]
    assert parrots and all(c.status is Status.PASSED and c.measurements["heard"] for c in parrots)
    assert result.evidence.verdict.status.value == "PASS"
    # the schema the registry generates knows the kind; the shipped one (the built-in kinds) does not
    assert "parrot" in evidence_schema(WITH_PARROT)["$defs"]["check"]["properties"]["kind"]["enum"]
    evidence = read_evidence_dict(path, kinds=WITH_PARROT)
    with pytest.raises(EvidenceError, match="is not one of"):
        read_evidence_dict(path)
    assert verify(VerifyOptions(path, allow_partial=True), WITH_PARROT).ok  # its rule re-derives its status
    forged = {**evidence, "checks": [dict(c) for c in evidence["checks"]]}
    first = next(c for c in forged["checks"] if c["kind"] == "parrot")
    first["measurements"] = {**first["measurements"], "heard": "something else"}
    manifest = load_manifest(project / "fasttrack.yaml")
    assert any(first["id"] in p and "passed, but it heard" in p for p in rederive(forged, manifest, WITH_PARROT))
    done = render_reports(path, kinds=WITH_PARROT, html=tmp_path / "r.html", markdown=tmp_path / "s.md", annotate=False)
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert '<section id="parrot">' in html and "<h2>Parrots</h2>" in html  # its own section
    assert "<b>X</b> parrot" in html  # its letter in the grid's legend
    assert done.verdict == "PASS"


def test_adding_the_kind_and_the_target_touched_one_folder_and_one_line_each():
    """Nothing in fasttrack/ names the test-only kind or target: the two folders and the two
    registry lines above are all of them."""
    for path in (ROOT / "fasttrack").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "parrot_kind" not in text and "parrot_target" not in text and '"parrot"' not in text, path
    assert set(WITH_PARROT) - set(KINDS) == {"parrot"} and list(WITH_PARROT)[:-1] == list(KINDS)
    assert set(TARGETS_WITH_PARROT) - set(TARGET_KINDS) == {"parrot"}


def test_a_target_kind_added_in_its_folder_opens_sides_the_checks_drive(tmp_path):
    project = materialise(tmp_path / "toy")
    manifest = load_manifest(project / "fasttrack.yaml")
    manifest = replace(manifest, target=replace(manifest.target, kind="parrot"))
    point = manifest.deployments()[0].as_dict()
    with opened_pair(manifest, point, targets=TARGETS_WITH_PARROT) as (baseline, candidate):
        assert isinstance(baseline.target, Target) and isinstance(candidate.target, PathReporting)
        # the switch's proof of path counts each side's decode steps through the target's own report
        default, _ = exercise(baseline.target, [1, 2])
        switched, by_batch = exercise(candidate.target, [1, 2])
    assert manifest.switch.path_value not in default and switched[manifest.switch.path_value] > 0
    assert set(by_batch) == {1, 2}
    assert baseline.target.closed and candidate.target.closed  # both sides closed after the pair
