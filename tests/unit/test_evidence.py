"""The evidence model: round trip, canonical bytes and digest, schema, fail-closed verdict."""

from __future__ import annotations

import hashlib
import json

import pytest

from fasttrack.errors import EvidenceError
from fasttrack.evidence import (
    Artifact,
    CheckOutcome,
    Evidence,
    GitRecord,
    ManifestRecord,
    RunRecord,
    Status,
    Verdict,
    canonical_bytes,
    compute_verdict,
    read_evidence,
    read_evidence_dict,
    validate_evidence_dict,
    write_evidence,
)


def outcome(i: int, status: Status = Status.PASSED, required: bool = True, **kw) -> CheckOutcome:
    return CheckOutcome(
        id=f"kernels/t{i}@batch={i}",
        kind="kernels",
        name=f"t{i}",
        status=status,
        scope_point={"batch": i},
        scope_point_id=f"batch={i}",
        required=required,
        **kw,
    )


def make_evidence(checks, state: str = "complete") -> Evidence:
    return Evidence(
        run=RunRecord(id="r1", started_at="2026-12-02T12:00:00Z", finished_at="2026-12-02T12:01:00Z", state=state),
        manifest=ManifestRecord("m.yaml", "a" * 64, "opt", "Opt", "org/model", "latency_specialized", {"fasttrack": 1}),
        git=GitRecord("b" * 40, "c" * 40, False, ("x.py",)),
        environment={"accelerator": "cpu", "device_count": 0},
        scope_points=({"id": "batch=1", "dims": {"batch": 1}},),
        checks=tuple(checks),
        verdict=compute_verdict(checks, run_state=state),
    )


class TestVerdict:
    def test_pass_needs_every_required_outcome_passed(self):
        v = compute_verdict([outcome(1), outcome(2)])
        assert v.status is Verdict.PASS
        assert v.counts["passed"] == 2

    @pytest.mark.parametrize("status", [Status.ERRORED, Status.NOT_RUN])
    def test_errored_or_not_run_is_incomplete(self, status):
        v = compute_verdict([outcome(1), outcome(2, status, reason_code="timeout", reason="ran past 5 s")])
        assert v.status is Verdict.INCOMPLETE
        assert any("ran past 5 s" in r and "(timeout)" in r for r in v.reasons)

    def test_failure_wins_over_incomplete(self):
        v = compute_verdict([outcome(1, Status.NOT_RUN), outcome(2, Status.FAILED, reason="batch 17 mismatch")])
        assert v.status is Verdict.FAIL
        assert v.reasons[0].startswith("failed: kernels/t2")

    def test_nothing_to_judge_is_incomplete_not_pass(self):
        assert compute_verdict([]).status is Verdict.INCOMPLETE
        assert compute_verdict([outcome(1, required=False)]).status is Verdict.INCOMPLETE

    def test_optional_failures_do_not_decide(self):
        v = compute_verdict([outcome(1), outcome(2, Status.FAILED, required=False)])
        assert v.status is Verdict.PASS

    def test_interrupted_run_is_never_pass(self):
        v = compute_verdict([outcome(1)], run_state="interrupted")
        assert v.status is Verdict.INCOMPLETE
        assert "interrupted" in v.reasons[0]


class TestSerialisation:
    def test_round_trip_is_identical(self, tmp_path):
        ev = make_evidence([outcome(1, measurements={"worst": 0.5, "nested": {"a": [1, 2]}})])
        path = tmp_path / "evidence.json"
        digest = write_evidence(ev, path)
        back = read_evidence(path)
        assert back.to_dict() == ev.to_dict()
        assert canonical_bytes(back.to_dict()) == path.read_bytes()
        assert digest == hashlib.sha256(path.read_bytes()).hexdigest() == back.digest

    def test_digest_changes_with_any_content(self):
        a = make_evidence([outcome(1)])
        b = make_evidence([outcome(1, duration_s=0.001)])
        assert a.digest != b.digest

    def test_key_order_does_not_change_bytes(self):
        d = make_evidence([outcome(1)]).to_dict()
        shuffled = dict(reversed(list(d.items())))
        assert canonical_bytes(d) == canonical_bytes(shuffled)

    def test_non_finite_numbers_become_null(self):
        ev = make_evidence([outcome(1, measurements={"kl": float("nan"), "x": float("inf")})])
        data = json.loads(canonical_bytes(ev.to_dict()))
        assert data["checks"][0]["measurements"] == {"kl": None, "x": None}

    def test_written_evidence_matches_schema(self, tmp_path):
        ev = make_evidence([outcome(1), outcome(2, Status.NOT_RUN, reason_code="hardware", reason="needs GB300")])
        write_evidence(ev, tmp_path / "evidence.json")
        validate_evidence_dict(json.loads((tmp_path / "evidence.json").read_text()))

    def test_artifact_from_file(self, tmp_path):
        f = tmp_path / "artifacts" / "log.txt"
        f.parent.mkdir()
        f.write_bytes(b"hello")
        art = Artifact.from_file(tmp_path, f)
        assert art.path == "artifacts/log.txt"
        assert art.sha256 == hashlib.sha256(b"hello").hexdigest() and art.bytes == 5

    def test_with_checks_recomputes_verdict(self):
        ev = make_evidence([outcome(1)])
        failed = ev.with_checks([outcome(1, Status.FAILED, reason="boom")], state="complete")
        assert failed.verdict.status is Verdict.FAIL


class TestBadInput:
    def test_missing_file(self, tmp_path):
        with pytest.raises(EvidenceError, match="not found"):
            read_evidence_dict(tmp_path / "nope.json")

    def test_malformed_json_names_line(self, tmp_path):
        p = tmp_path / "evidence.json"
        p.write_text('{\n "version": 1,\n oops\n}')
        with pytest.raises(EvidenceError, match=r"evidence.json:3: evidence is not valid JSON"):
            read_evidence_dict(p)

    def test_schema_violation_names_json_path(self, tmp_path):
        data = make_evidence([outcome(1)]).to_dict()
        data["checks"][0]["status"] = "maybe"
        with pytest.raises(EvidenceError, match=r"\$\.checks\[0\]\.status"):
            validate_evidence_dict(data)

    def test_directory_means_its_evidence_json(self, tmp_path):
        write_evidence(make_evidence([outcome(1)]), tmp_path / "evidence.json")
        assert read_evidence_dict(tmp_path)["version"] == 1


def test_the_evidence_schema_knows_every_check_kind():
    """The schema's kind enum is generated from the kinds registry, and the shipped file is that
    output (`fasttrack schema evidence`): no hand-kept list of kinds."""
    from fasttrack.kinds.registry import KINDS
    from fasttrack.resources import evidence_schema, schema_path, schema_text

    assert evidence_schema(KINDS)["$defs"]["check"]["properties"]["kind"]["enum"] == list(KINDS)
    assert schema_path("evidence").read_text(encoding="utf-8") == schema_text(evidence_schema(KINDS))
