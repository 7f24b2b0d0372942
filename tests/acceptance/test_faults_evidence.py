"""#20 rows 2, 3 and 6: forged evidence does not verify (signed or not), --resume does not reuse
it, and a full disk leaves the last complete evidence intact with a clear error."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from fasttrack.attest import attest
from fasttrack.evidence import Status, read_evidence, write_evidence
from support.projects import materialise

BAD_POINT = "accelerator=cpu,batch=17,device_count=1"


def fasttrack(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fasttrack", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory) -> tuple[Path, Path]:
    """A real run whose kernel test fails at batch 17 (--only kernels: FAIL). (project, out)."""
    root = tmp_path_factory.mktemp("failing")
    project = materialise(root / "p", "fails_at_17")
    done = fasttrack(project, "check", "fasttrack.yaml", "--only", "kernels", "--out", str(root / "out"))
    assert done.returncode == 1, done.stdout + done.stderr
    return project, root / "out"


def copy_of(run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(run, out)
    return out


def forge(out: Path, change) -> None:
    """Rewrite the evidence as a forger would: outcomes changed, verdict recomputed, the digest
    sidecar rewritten (write_evidence) and attested again."""
    evidence = read_evidence(out / "evidence.json")
    write_evidence(evidence.with_checks(change(list(evidence.checks))), out / "evidence.json")
    attest(out / "evidence.json")


def flipped(checks):
    return [
        replace(c, status=Status.PASSED, reason_code=None, reason=None) if c.scope_point_id == BAD_POINT else c
        for c in checks
    ]


def test_a_flipped_outcome_does_not_verify(failing_run, tmp_path):
    project, run = failing_run
    out = copy_of(run, tmp_path)
    forge(out, flipped)
    assert read_evidence(out / "evidence.json").verdict.status.value == "PASS"  # the forger's verdict
    done = fasttrack(project, "verify", str(out), "--allow-partial")
    assert done.returncode == 1 and "verified\n" not in done.stdout, done.stdout
    assert "FAIL measurements:" in done.stdout
    assert f"kernels/toy-kernels@{BAD_POINT}: passed, but 1 kernel test(s) failed or errored here" in done.stdout


def test_a_removed_failed_outcome_does_not_verify(failing_run, tmp_path):
    project, run = failing_run
    out = copy_of(run, tmp_path)
    forge(out, lambda checks: [c for c in checks if c.scope_point_id != BAD_POINT])
    done = fasttrack(project, "verify", str(out), "--allow-partial")
    assert done.returncode == 1 and "FAIL plan:" in done.stdout
    assert f"kernels/toy-kernels@{BAD_POINT}: planned, but the evidence has no outcome for it" in done.stdout


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen")
def test_a_signed_forgery_does_not_verify_either(failing_run, tmp_path):
    project, run = failing_run
    out = copy_of(run, tmp_path)
    forge(out, flipped)
    key = tmp_path / "lab"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "lab", "-f", str(key)], check=True)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f'lab namespaces="fasttrack" {key.with_suffix(".pub").read_text().strip()}\n')
    attest(out / "evidence.json", sign_key=key)
    done = fasttrack(project, "verify", str(out), "--allow-partial", "--allowed-signers", str(allowed))
    assert "ok   signature: signed by lab" in done.stdout
    assert done.returncode == 1 and "FAIL measurements:" in done.stdout


def test_resume_refuses_edited_evidence_and_reuses_evidence_that_verifies(failing_run, tmp_path):
    project, run = failing_run
    untouched = copy_of(run, tmp_path / "a")
    done = fasttrack(project, "check", "fasttrack.yaml", "--only", "kernels", "--out", str(untouched), "--resume")
    assert done.returncode == 1
    assert "--resume: the earlier evidence verifies" in done.stderr
    assert "reused" in done.stderr and json.loads((untouched / "evidence.json").read_text())["run"]["resume"]

    edited = copy_of(run, tmp_path / "b")
    forge(edited, flipped)
    done = fasttrack(project, "check", "fasttrack.yaml", "--only", "kernels", "--out", str(edited), "--resume")
    assert done.returncode == 1, done.stdout + done.stderr  # re-run: the kernel test fails again
    assert "--resume: the earlier evidence does not verify, so nothing of it is reused: measurements:" in done.stderr
    evidence = json.loads((edited / "evidence.json").read_text())
    assert evidence["verdict"]["status"] == "FAIL"
    assert evidence["run"]["resume"].startswith("--resume: the earlier evidence does not verify")
    bad = next(c for c in evidence["checks"] if c["scope_point_id"] == BAD_POINT)
    assert bad["status"] == "failed"


def _small_tmpfs(path: Path) -> bool:
    path.mkdir()
    if shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


@pytest.mark.slow
def test_a_full_disk_is_a_clear_error_with_the_last_complete_evidence_intact(tmp_path):
    """On a real 64 KiB tmpfs (needs root; the unit tests simulate ENOSPC everywhere)."""
    disk = tmp_path / "disk"
    if not _small_tmpfs(disk):
        pytest.skip("cannot mount a small tmpfs here (needs root): tests/unit/test_fileio.py simulates ENOSPC")
    try:
        project = materialise(tmp_path / "p")
        out = disk / "out"
        done = fasttrack(project, "check", "fasttrack.yaml", "--base", "HEAD", "--out", str(out))
        assert done.returncode == 3, done.stdout + done.stderr
        assert "no space left on the device" in done.stderr and "Traceback" not in done.stderr
        assert "is the last complete evidence written" in done.stderr or "only this output is missing" in done.stderr
        for name in ("evidence.json", "evidence.json.sha256", "attestation.intoto.json"):
            assert not (out / name).exists() or (out / name).stat().st_size > 0, f"{name} is empty"
        verified = fasttrack(project, "verify", str(out))
        assert "ok   digest:" in verified.stdout and "ok   canonical:" in verified.stdout, verified.stdout
        assert "changed after it was attested" not in verified.stdout
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)
