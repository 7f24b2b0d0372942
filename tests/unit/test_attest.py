"""Attestation: digest sidecar, in-toto Statement v1 with the test-result predicate, SSH signing."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from fasttrack.attest import (
    STATEMENT_TYPE,
    TEST_RESULT_PREDICATE,
    attest,
    paths_for,
    verify_signature,
)
from fasttrack.errors import UsageError
from fasttrack.evidence import canonical_bytes, write_evidence
from support import evidence_fixtures

needs_ssh = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen (OpenSSH) is not installed")


def make_key(directory: Path, name: str = "signer") -> tuple[Path, Path]:
    """An ed25519 key pair and an allowed_signers file naming it."""
    key = directory / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    allowed = directory / f"{name}.allowed_signers"
    allowed.write_text(f'{name}@example.org namespaces="fasttrack" {key.with_suffix(".pub").read_text().strip()}\n')
    return key, allowed


@pytest.fixture
def evidence_path(tmp_path) -> Path:
    path = tmp_path / "run" / "evidence.json"
    write_evidence(evidence_fixtures.build_evidence("kimi-k3-latency", "incomplete", samples=240), path)
    return path


def test_statement_names_the_evidence_digest_and_the_results(evidence_path):
    paths = attest(evidence_path)
    digest = hashlib.sha256(evidence_path.read_bytes()).hexdigest()
    assert paths.sidecar.read_text() == f"{digest}  evidence.json\n"
    statement = json.loads(paths.statement.read_text())
    assert paths.statement.read_bytes() == canonical_bytes(statement)
    assert statement["_type"] == STATEMENT_TYPE
    assert statement["predicateType"] == TEST_RESULT_PREDICATE
    assert statement["subject"][0] == {"name": "evidence.json", "digest": {"sha256": digest}}
    evidence = json.loads(evidence_path.read_text())
    assert statement["subject"][1]["digest"]["gitCommit"] == evidence["git"]["head"]
    predicate = statement["predicate"]
    assert predicate["result"] == "WARNED"  # INCOMPLETE
    required = [c for c in evidence["checks"] if c["required"]]
    assert len(predicate["passedTests"]) == sum(c["status"] == "passed" for c in required)
    assert len(predicate["warnedTests"]) == sum(c["status"] in ("errored", "not_run") for c in required)
    assert predicate["configuration"][0]["digest"]["sha256"] == evidence["manifest"]["sha256"]


def test_paths_for_other_names(tmp_path):
    paths = paths_for(tmp_path / "k3.json")
    assert paths.statement.name == "k3.intoto.json" and paths.sidecar.name == "k3.json.sha256"
    assert paths.signature.name == "k3.intoto.json.sig"


@needs_ssh
def test_sign_and_verify_round_trip(evidence_path, tmp_path):
    key, allowed = make_key(tmp_path)
    paths = attest(evidence_path, sign_key=key)
    assert paths.signature.is_file()
    ok, message = verify_signature(paths.statement, paths.signature, allowed)
    assert ok, message
    assert "signer@example.org" in message
    # Re-attesting without a key removes the now-stale signature.
    attest(evidence_path)
    assert not paths.signature.exists()


@needs_ssh
def test_signature_of_a_changed_statement_fails(evidence_path, tmp_path):
    key, allowed = make_key(tmp_path)
    paths = attest(evidence_path, sign_key=key)
    paths.statement.write_bytes(paths.statement.read_bytes().replace(b"WARNED", b"PASSED"))
    ok, message = verify_signature(paths.statement, paths.signature, allowed)
    assert not ok and "bad signature" in message


def test_missing_key_is_a_usage_error(evidence_path, tmp_path):
    with pytest.raises(UsageError, match="signing key not found"):
        attest(evidence_path, sign_key=tmp_path / "nokey")
