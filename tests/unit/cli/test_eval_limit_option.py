"""`--eval-limit ID=N|all`: parsing, the manifest override, and how the evidence, the summary and
`fasttrack merge` carry it."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from fasttrack.cli.options import parse_eval_limits
from fasttrack.engine.merge import merge_evidence
from fasttrack.errors import UsageError
from fasttrack.evidence import Evidence, RunRecord, validate_evidence_dict
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.manifest.overrides import with_eval_limits
from fasttrack.report.summary import summary_text
from support import evidence_fixtures
from support.paths import ROOT

EXAMPLE = ROOT / "examples" / "mini-k3" / "fasttrack.yaml"


def test_parse_accepts_counts_and_all_and_keeps_the_last_of_repeats():
    assert parse_eval_limits(["mrcr=all", "aime25=72", "mrcr=120"]) == (("mrcr", 120), ("aime25", 72))
    assert parse_eval_limits(["mrcr = ALL"]) == (("mrcr", None),)
    assert parse_eval_limits([]) == ()


@pytest.mark.parametrize(
    "bad, says",
    [
        ("mrcr", "expected ID=N or ID=all"),
        ("=5", "expected ID=N or ID=all"),
        ("mrcr=0", ">= 1 or 'all'"),
        ("mrcr=-3", ">= 1 or 'all'"),
        ("mrcr=1.5", ">= 1 or 'all'"),
    ],
)
def test_parse_rejects_malformed_values(bad, says):
    with pytest.raises(UsageError, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_eval_limits([bad])


def test_override_changes_only_the_named_evals_sample_size():
    manifest = load_manifest(EXAMPLE)
    out = with_eval_limits(manifest, (("mrcr", None),))
    by_id = {ev.id: ev for ev in out.evals}
    before = {ev.id: ev for ev in manifest.evals}
    assert by_id["mrcr"].limit is None and by_id["mrcr"].raw["limit"] is None
    assert by_id["mrcr"].margin == before["mrcr"].margin and by_id["mrcr"].points == before["mrcr"].points
    assert by_id["aime25"] == before["aime25"]
    assert out.sha256 == manifest.sha256 and out.data == manifest.data  # the record of the file stays the file's
    assert with_eval_limits(manifest, ()) is manifest


def test_unknown_eval_id_names_the_declared_ones():
    manifest = load_manifest(EXAMPLE)
    with pytest.raises(UsageError, match=r"declares no eval with id 'gsm8k' \(declared: mrcr, aime25\)"):
        with_eval_limits(manifest, (("gsm8k", 10),))


def _evidence(limits) -> Evidence:
    """A fixture evidence of the example run with these --eval-limit overrides."""
    evidence = evidence_fixtures.build_evidence("kimi-k3-latency", "pass")
    return replace(evidence, run=replace(evidence.run, eval_limits=tuple(limits)))


def test_summary_names_the_override_next_to_the_manifests_limit():
    text = summary_text(_evidence((("mrcr", None),)), KINDS)
    assert "  eval sample sizes from the command line, not the manifest: mrcr=all (manifest: all)\n" in text
    assert "eval sample sizes" not in summary_text(_evidence(()), KINDS)


def test_merge_refuses_parts_with_different_limits_and_keeps_equal_ones():
    a, b = _evidence((("mrcr", None),)), _evidence((("mrcr", 120),))
    with pytest.raises(UsageError, match="shards differ in --eval-limit"):
        merge_evidence([a, b])
    merged = merge_evidence([a, _evidence((("mrcr", None),))])
    assert merged.run.eval_limits == (("mrcr", None),)
    validate_evidence_dict(merged.to_dict())


def test_run_record_round_trips_and_validates_with_limits():
    run = RunRecord(
        "r1",
        "2026-12-02T00:00:00Z",
        None,
        "running",
        ("fasttrack", "check"),
        None,
        (),
        (),
        (),
        (("mrcr", None), ("aime25", 72)),
    )
    data = run.to_dict()
    assert data["eval_limits"] == {"mrcr": None, "aime25": 72}
    assert RunRecord.from_dict(data) == run
    assert "eval_limits" not in replace(run, eval_limits=()).to_dict()


def test_cli_unknown_eval_id_is_a_one_paragraph_usage_error(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fasttrack",
            "check",
            str(EXAMPLE),
            "--eval-limit",
            "nope=3",
            "--out",
            str(tmp_path / "x"),
            "-q",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "declares no eval with id 'nope' (declared: mrcr, aime25)" in done.stderr
    assert not (tmp_path / "x" / "evidence.json").exists()
