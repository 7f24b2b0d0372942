"""`fasttrack verify`: accepts untouched evidence; rejects each kind of mismatch with the reason."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fasttrack.attest import attest
from fasttrack.errors import EvidenceError, UsageError
from fasttrack.evidence import write_evidence
from fasttrack.kinds.registry import KINDS
from fasttrack.verification.verify import VerifyOptions, verify
from support.paths import ROOT
from support.planned_evidence import narrowed, planned_evidence

needs_ssh = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen (OpenSSH) is not installed")
KIMI = ROOT / "examples" / "kimi-k3-latency" / "fasttrack.yaml"  # GB300, 8 or 16 GPUs
MINI = ROOT / "examples" / "mini-k3" / "fasttrack.yaml"  # cpu and one H200
TOY = ROOT / "tests" / "fixtures" / "faults" / "base" / "fasttrack.yaml"  # cpu only


def lab_evidence(mode: str = "pass", manifest: Path = KIMI, **kw):
    """Evidence as a GB300 lab run of the Kimi manifest writes it (support.planned_evidence)."""
    return planned_evidence(manifest, mode=mode, **kw)


@pytest.fixture
def run(tmp_path):
    """A passing evidence for a real manifest file, attested. Returns (evidence path, manifest path, head)."""
    manifest = tmp_path / "fasttrack.yaml"
    shutil.copy(KIMI, manifest)
    ev = lab_evidence(manifest=manifest)
    path = tmp_path / "out" / "evidence.json"
    write_evidence(ev, path)
    attest(path)
    return path, manifest, ev.git.head


def failed(result) -> dict[str, str]:
    return {f.name: f.message for f in result.failures}


def test_accepts_untouched_evidence(run):
    path, manifest, head = run
    result = verify(VerifyOptions(path, manifest=manifest, head=head), KINDS)
    assert result.ok, failed(result)
    assert {f.name for f in result.findings} >= {"canonical", "digest", "manifest", "head", "hardware", "verdict"}
    assert verify(VerifyOptions(path, head=head[:10]), KINDS).ok  # a prefix of 7+ is enough


def test_rejects_one_changed_byte(run):
    path, manifest, head = run
    data = path.read_bytes()
    i = data.index(b'"title": "')
    path.write_bytes(data[: i + 1] + bytes([data[i + 1] ^ 1]) + data[i + 2 :])
    result = verify(VerifyOptions(path, manifest=manifest, head=head), KINDS)
    assert not result.ok
    assert "the evidence changed after it was attested" in failed(result)["digest"]


def test_rejects_a_different_head(run):
    path, _, head = run
    other = "0" * 40
    result = verify(VerifyOptions(path, head=other), KINDS)
    assert failed(result) == {"head": f"head commit {head} is not {other}"}
    assert not verify(VerifyOptions(path, head=head[:4]), KINDS).ok  # too short to mean anything


def test_rejects_a_different_manifest(run, tmp_path):
    path, _, head = run
    other = tmp_path / "other.yaml"
    other.write_text(KIMI.read_text().replace("id: kimi-k3-latency", "id: glm-k3-latency"))
    result = verify(VerifyOptions(path, manifest=other, head=head), KINDS)
    assert list(failed(result)) == ["manifest"]
    assert "is not the manifest the run checked" in failed(result)["manifest"]


def _rewrite(path: Path, ev) -> None:
    write_evidence(ev, path)
    attest(path)


def test_rejects_out_of_scope_hardware(tmp_path):
    ev = lab_evidence()
    path = tmp_path / "evidence.json"
    for env_change, expected in (
        ({"accelerator_count": 4}, "ran on 4x NVIDIA GB300, outside the declared scope"),
        ({"accelerator": "NVIDIA H100"}, "ran on 16x NVIDIA H100, outside the declared scope"),
    ):
        _rewrite(path, dataclasses.replace(ev, environment={**ev.environment, **env_change}))
        assert failed(verify(VerifyOptions(path), KINDS)) == {"hardware": expected + " (NVIDIA GB300 x [8, 16])"}


def test_hardware_from_the_given_manifest(tmp_path):
    ev = lab_evidence()
    path = tmp_path / "evidence.json"
    _rewrite(path, ev)
    other = tmp_path / "fasttrack.yaml"  # declares cpu and one H200, not GB300
    shutil.copy(MINI, other)
    result = verify(VerifyOptions(path, manifest=other, hardware_from_manifest=True), KINDS)
    assert "hardware" in failed(result) and "manifest" in failed(result)
    assert "outside the declared scope (cpu x [1]; NVIDIA H200 x [1])" in failed(result)["hardware"]
    # Its plan is not what the evidence holds either.
    assert "difference(s) between the outcomes and the plan of" in failed(result)["plan"]
    with pytest.raises(UsageError, match="needs --manifest"):
        verify(VerifyOptions(path, hardware_from_manifest=True), KINDS)


def test_cpu_scope_accepts_cpu_runs(tmp_path):
    ev = lab_evidence(manifest=TOY)
    assert ev.environment["accelerator"] == "cpu"
    path = tmp_path / "evidence.json"
    _rewrite(path, ev)
    assert verify(VerifyOptions(path), KINDS).ok


def test_rejects_a_verdict_other_than_pass(tmp_path):
    path = tmp_path / "evidence.json"
    _rewrite(path, lab_evidence("fail"))
    result = verify(VerifyOptions(path), KINDS)
    assert list(failed(result)) == ["verdict"]
    assert failed(result)["verdict"].startswith("verdict is FAIL: 344 of 345 required outcomes passed; 1 failed (")


def test_rejects_a_verdict_that_does_not_follow_from_the_outcomes(tmp_path):
    ev = lab_evidence("fail")
    forged = dataclasses.replace(ev, verdict=dataclasses.replace(ev.verdict, status=type(ev.verdict.status)("PASS")))
    path = tmp_path / "evidence.json"
    _rewrite(path, forged)
    assert list(failed(verify(VerifyOptions(path), KINDS))) == ["verdict-consistent"]


def test_rejects_unattested_and_non_canonical_evidence(tmp_path):
    ev = lab_evidence()
    path = tmp_path / "evidence.json"
    write_evidence(ev, path)  # writes the digest sidecar beside it
    (tmp_path / "evidence.json.sha256").unlink()  # as evidence copied without it
    assert "no recorded digest" in failed(verify(VerifyOptions(path), KINDS))["digest"]
    path.write_bytes(path.read_bytes().replace(b'\n "checks"', b'\n  "checks"', 1))
    attest(path)  # even with a matching digest, a hand-edited file is not what fasttrack wrote
    assert list(failed(verify(VerifyOptions(path), KINDS))) == ["canonical"]


def test_bad_input_raises_usage_or_evidence_errors(tmp_path):
    with pytest.raises(EvidenceError, match="not found"):
        verify(VerifyOptions(tmp_path / "missing.json"), KINDS)
    bad = tmp_path / "evidence.json"
    bad.write_text("{not json")
    with pytest.raises(EvidenceError, match="not valid JSON"):
        verify(VerifyOptions(bad), KINDS)


@needs_ssh
def test_signature_good_bad_and_missing(run, tmp_path):
    from test_attest import make_key

    path, manifest, head = run
    key, allowed = make_key(tmp_path, "alice")
    _, other_allowed = make_key(tmp_path, "mallory")
    attest(path, sign_key=key)
    assert verify(VerifyOptions(path, manifest=manifest, head=head, allowed_signers=allowed), KINDS).ok
    result = verify(VerifyOptions(path, allowed_signers=other_allowed), KINDS)
    assert list(failed(result)) == ["signature"] and "not in" in failed(result)["signature"]
    # A signature present but not checked does not pass silently.
    assert list(failed(verify(VerifyOptions(path), KINDS))) == ["signature"]
    # A signature over a different statement is a bad signature.
    other_ev = tmp_path / "other" / "evidence.json"
    write_evidence(lab_evidence(head="a" * 40), other_ev)
    attest(other_ev, sign_key=key)
    shutil.copy(other_ev.parent / "attestation.intoto.json.sig", path.parent / "attestation.intoto.json.sig")
    result = verify(VerifyOptions(path, allowed_signers=allowed), KINDS)
    assert list(failed(result)) == ["signature"] and "bad signature" in failed(result)["signature"]
    # Unsigned evidence when a signer is required.
    attest(path)
    assert "evidence is unsigned" in failed(verify(VerifyOptions(path, allowed_signers=allowed), KINDS))["signature"]


def test_cli_exit_codes(run, tmp_path):
    path, manifest, head = run

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "fasttrack", "verify", *args], capture_output=True, text=True, timeout=60
        )

    ok = cli(str(path), "--manifest", str(manifest), "--head", head)
    assert ok.returncode == 0 and ok.stdout.strip().endswith("verified"), ok.stderr
    bad = cli(str(path), "--head", "f" * 40)
    assert bad.returncode == 1 and "not verified: head commit" in bad.stderr
    missing = cli(str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


@pytest.mark.parametrize(
    "selection, words",
    [
        ({"hardware": ("cpu",)}, "--hardware cpu"),
        ({"only": ("kernels",)}, "--only kernels"),
    ],
)
def test_rejects_a_partial_run_unless_allowed(tmp_path, selection, words):
    """A PASS that covered only part of the scope (--only, --hardware) is not the gate's PASS."""
    ev = narrowed(lab_evidence(manifest=MINI), **selection)
    left_out = sum(1 for c in ev.checks if c.reason_code == "out_of_scope")
    assert left_out > 0
    path = tmp_path / "evidence.json"
    _rewrite(path, ev)
    assert ev.verdict.status.value == "PASS"
    result = verify(VerifyOptions(path), KINDS)
    assert list(failed(result)) == ["whole-scope"]
    assert words in failed(result)["whole-scope"] and f"{left_out} outcome(s) left out" in failed(result)["whole-scope"]
    assert verify(VerifyOptions(path, allow_partial=True), KINDS).ok
