"""#35 rows 1, 2, 5, 6, 7 and 10: parts of a merge, artifacts and --out are untrusted input.

One real run of the fixture project (`--only kernels`, whose test fails at batch 17, with logs
and JUnit artifacts) is copied and forged as an attacker would: outcomes flipped with the digest
recomputed, artifact paths that leave the folder, symlinks in artifacts/, a replaced log."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from fasttrack.evidence import Artifact, Status, read_evidence, write_evidence
from support.projects import materialise
from support.waiting import WAIT_S, wait_for

BAD_POINT = "accelerator=cpu,batch=17,device_count=1"


def fasttrack(cwd: Path, *args: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fasttrack", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
        **kw,
    )


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("failing")
    project = materialise(root / "p", "fails_at_17")
    done = fasttrack(project, "check", "fasttrack.yaml", "--only", "kernels", "--out", str(root / "out"), "-q")
    assert done.returncode == 1, done.stdout + done.stderr
    return project, root / "out"


def copy_of(run: Path, dest: Path) -> Path:
    shutil.copytree(run, dest, symlinks=True)
    return dest


def rewrite(out: Path, change) -> None:
    """As a forger would: the outcomes changed, the verdict and the digest sidecar recomputed."""
    evidence = read_evidence(out / "evidence.json")
    write_evidence(evidence.with_checks(change(list(evidence.checks))), out / "evidence.json")


def flipped(checks):
    return [
        replace(c, status=Status.PASSED, reason_code=None, reason=None) if c.scope_point_id == BAD_POINT else c
        for c in checks
    ]


def first_artifact(out: Path) -> str:
    data = json.loads((out / "evidence.json").read_text())
    return next(a["path"] for c in data["checks"] for a in c["artifacts"] if a["path"].endswith(".log"))


def test_row1_a_forged_part_is_refused_by_merge_naming_it(failing_run, tmp_path):
    project, run = failing_run
    part = copy_of(run, tmp_path / "parts" / "p1")
    rewrite(part, flipped)
    assert read_evidence(part / "evidence.json").verdict.status.value == "PASS"  # the forger's verdict
    done = fasttrack(project, "merge", str(part), "--out", str(tmp_path / "m"), "--no-reports")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"part {part} does not verify" in done.stderr and "measurements:" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "m" / "evidence.json").exists()
    # The honest part merges, and its verdict stays FAIL.
    honest = fasttrack(project, "merge", str(run), "--out", str(tmp_path / "h"), "--no-reports")
    assert honest.returncode == 1 and "does not verify" not in honest.stderr
    assert json.loads((tmp_path / "h" / "evidence.json").read_text())["verdict"]["status"] == "FAIL"


def test_row2_artifact_paths_leaving_the_folder_are_refused_on_read(failing_run, tmp_path):
    project, run = failing_run
    part = copy_of(run, tmp_path / "parts" / "p1")
    (tmp_path / "payload.sh").write_text("echo pwned\n")
    escape = Artifact("../../payload.sh", hashlib.sha256(b"echo pwned\n").hexdigest(), 11, "other", "x")
    rewrite(part, lambda checks: [replace(checks[0], artifacts=(*checks[0].artifacts, escape)), *checks[1:]])
    out = tmp_path / "deep" / "m"
    for verb in (["merge", str(part), "--out", str(out)], ["verify", str(part)]):
        done = fasttrack(project, *verb)
        assert done.returncode == 2, done.stdout + done.stderr
        assert ".artifacts[" in done.stderr and "'../../payload.sh'" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "deep" / "payload.sh").exists() and not (out / "evidence.json").exists()


def test_row2_symlinks_in_a_part_are_never_followed(failing_run, tmp_path):
    project, run = failing_run
    secret = tmp_path / "SECRET"
    secret.write_text("the runner's token\n")
    part = copy_of(run, tmp_path / "parts" / "p1")
    (part / "artifacts" / "leak").symlink_to(secret)  # not referenced: never copied
    log = first_artifact(part)
    (part / log).unlink()
    (part / log).symlink_to(secret)  # referenced, and the record forged to the secret's digest
    data = secret.read_bytes()

    def forged(checks):
        return [
            replace(
                c,
                artifacts=tuple(
                    replace(a, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data)) if a.path == log else a
                    for a in c.artifacts
                ),
            )
            for c in checks
        ]

    rewrite(part, forged)
    done = fasttrack(project, "merge", str(part), "--out", str(tmp_path / "m"), "--no-reports")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "artifacts:" in done.stderr and "symbolic link" in done.stderr
    copied = [p for p in (tmp_path / "m").rglob("*") if p.is_file()] if (tmp_path / "m").exists() else []
    assert all(b"token" not in p.read_bytes() for p in copied)
    assert not (tmp_path / "m" / "artifacts" / "leak").exists()


def test_row7_a_replaced_artifact_does_not_verify(failing_run, tmp_path):
    project, run = failing_run
    out = copy_of(run, tmp_path / "out")
    log = first_artifact(out)
    (out / log).write_text("all tests passed\n")
    done = fasttrack(project, "verify", str(out), "--allow-partial", "--manifest", str(project / "fasttrack.yaml"))
    assert done.returncode == 1
    assert f"FAIL artifacts: 1 artifact(s) not as recorded: {log}: sha256" in done.stdout
    merged = fasttrack(project, "merge", str(out), "--out", str(tmp_path / "m"), "--no-reports")
    assert merged.returncode == 1 and "artifacts:" in merged.stderr and "the file was replaced" in merged.stderr
    # An absolute path is refused on read, before any file is opened.
    rewrite(out, lambda c: [replace(c[0], artifacts=(Artifact("/etc/passwd", "0" * 64, 1),)), *c[1:]])
    done = fasttrack(project, "verify", str(out), "--allow-partial")
    assert done.returncode == 2 and "'/etc/passwd' is absolute" in done.stderr


def test_row6_verify_without_manifest_warns_and_fails_in_ci_mode(failing_run, tmp_path):
    """Drop the failing point from both the outcomes and the manifest copy, digest recomputed:
    only the base's manifest shows it."""
    project, run = failing_run
    out = copy_of(run, tmp_path / "out")
    evidence = read_evidence(out / "evidence.json")
    data = evidence.manifest.data
    data["scope"]["batch"]["points"] = [1, 32]
    evidence = replace(evidence, manifest=replace(evidence.manifest, data=data))
    write_evidence(
        evidence.with_checks([c for c in evidence.checks if c.scope_point_id != BAD_POINT]), out / "evidence.json"
    )
    trusting = fasttrack(project, "verify", str(out), "--allow-partial")
    assert trusting.returncode == 0 and "verified" in trusting.stdout  # what the issue reproduced...
    assert "WARNING: no --manifest given" in trusting.stderr  # ...now said loudly
    ci = fasttrack(project, "verify", str(out), "--allow-partial", env={"CI": "true"})
    assert ci.returncode == 1 and "in CI mode (CI=true) give --manifest" in ci.stdout
    based = fasttrack(
        project,
        "verify",
        str(out),
        "--allow-partial",
        "--manifest",
        str(project / "fasttrack.yaml"),
        env={"CI": "true"},
    )
    assert (
        based.returncode == 1
        and f"kernels/toy-kernels@{BAD_POINT}: planned, but the evidence has no outcome" in based.stdout
    )


HOLD = """
import sys
from pathlib import Path
from fasttrack.outlock import lock_out
lock_out(Path(sys.argv[1]))
print("locked", flush=True)
sys.stdin.read()
"""


def test_row5_a_second_run_into_a_held_out_folder_exits_2_naming_the_holder(tmp_path):
    project = materialise(tmp_path / "p")
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        for verb in (["check", "fasttrack.yaml", "--only", "scope"], ["merge", str(tmp_path / "nothing")]):
            done = fasttrack(project, *verb, "--out", str(out))
            assert done.returncode == 2, done.stdout + done.stderr
            assert f"--out {out} is in use by another fasttrack run (pid {holder.pid}:" in done.stderr
            assert not (out / "evidence.json").exists()
    finally:
        holder.communicate("", timeout=WAIT_S)
    # The holder ended: the lock went with it.
    assert fasttrack(project, "check", "fasttrack.yaml", "--only", "scope", "--out", str(out)).returncode == 0


def test_row10_outputs_are_readable_per_the_umask(failing_run):
    _project, run = failing_run
    for name in ("evidence.json", "evidence.json.sha256", "summary.txt"):
        assert (run / name).stat().st_mode & 0o777 == 0o666 & ~_umask(), name


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell's background job or nohup starts it


@pytest.mark.slow
def test_row10_sigint_is_handled_even_when_inherited_as_ignored(tmp_path):
    project = materialise(tmp_path / "p", "hang")  # its batch-17 kernel test never returns (20 s timeout)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fasttrack", "check", "fasttrack.yaml", "--only", "kernels", "--out", str(out)],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_ignore_sigint,
    )
    wait_for(lambda: (out / "evidence.json").exists(), "the run's first evidence")
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 130, output
    assert json.loads((out / "evidence.json").read_text())["run"]["state"] == "interrupted"
