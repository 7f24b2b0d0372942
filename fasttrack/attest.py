"""Attest evidence: its sha256 in a sidecar, an in-toto Statement v1 with the test-result
predicate beside it, and optionally an SSH signature (``ssh-keygen -Y sign -n fasttrack``).

Files, for ``DIR/evidence.json``:
  DIR/evidence.json.sha256          ``<hex>  evidence.json`` (sha256sum format)
  DIR/attestation.intoto.json       the Statement (canonical JSON)
  DIR/attestation.intoto.json.sig   the SSH signature of the Statement's bytes, when signed
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fasttrack.errors import UsageError
from fasttrack.evidence import canonical_bytes, parse_evidence, read_evidence_bytes, sidecar_paths
from fasttrack.fileio import SIDECAR_MAX_BYTES, InputTooLarge, atomic_write_all, read_capped

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
TEST_RESULT_PREDICATE = "https://in-toto.io/attestation/test-result/v0.1"
SIGNING_NAMESPACE = "fasttrack"
_RESULT = {"PASS": "PASSED", "FAIL": "FAILED", "INCOMPLETE": "WARNED"}
_SSH_TIMEOUT_S = 30


@dataclass(frozen=True)
class AttestationPaths:
    evidence: Path
    sidecar: Path
    statement: Path
    signature: Path


def paths_for(evidence_path: Path) -> AttestationPaths:
    evidence = Path(evidence_path)
    if evidence.is_dir():
        evidence = evidence / "evidence.json"
    return AttestationPaths(evidence, *sidecar_paths(evidence))


def build_statement(evidence: Mapping[str, Any], evidence_name: str, digest: str) -> dict[str, Any]:
    """An in-toto Statement v1 whose subject is the evidence file (and the head commit)."""
    subject = [{"name": evidence_name, "digest": {"sha256": digest}}]
    head = evidence["git"].get("head")
    if head:
        subject.append({"name": "git-head", "digest": {"gitCommit": head}})
    passed: list[str] = []
    warned: list[str] = []
    failed: list[str] = []
    for c in evidence.get("checks", ()):
        if not c.get("required", True):
            continue
        {"passed": passed, "failed": failed}.get(c["status"], warned).append(c["id"])
    m = evidence["manifest"]
    return {
        "_type": STATEMENT_TYPE,
        "subject": subject,
        "predicateType": TEST_RESULT_PREDICATE,
        "predicate": {
            "result": _RESULT[evidence["verdict"]["status"]],
            "configuration": [
                {
                    "name": m["path"],
                    "digest": {"sha256": m["sha256"]},
                    "annotations": {"optimisation_id": m["optimisation_id"], "model_id": m["model_id"]},
                }
            ],
            "passedTests": passed,
            "warnedTests": warned,
            "failedTests": failed,
        },
    }


def attest(evidence_path: Path, sign_key: Path | None = None, kinds: Iterable[str] | None = None) -> AttestationPaths:
    """Write the sidecar digest and the Statement; sign the Statement when ``sign_key`` is given.
    ``kinds``: the check kinds the evidence may hold (None: the shipped schema's)."""
    paths = paths_for(evidence_path)
    raw = read_evidence_bytes(paths.evidence)
    evidence = parse_evidence(raw, str(paths.evidence), kinds=kinds)
    digest = hashlib.sha256(raw).hexdigest()
    paths.signature.unlink(missing_ok=True)  # a signature of an older statement would mislead
    statement = canonical_bytes(build_statement(evidence, paths.evidence.name, digest))
    # Both at once (fileio.atomic_write_all): a full disk leaves the previous pair, never a 0-byte one.
    atomic_write_all([(paths.sidecar, f"{digest}  {paths.evidence.name}\n".encode()), (paths.statement, statement)])
    if sign_key is not None:
        sign(paths.statement, Path(sign_key))
    return paths


def _ssh_keygen() -> str:
    tool = shutil.which("ssh-keygen")
    if tool is None:
        raise UsageError("ssh-keygen is not installed: install OpenSSH (8.1 or later) to sign or verify signatures")
    return tool


def sign(path: Path, key: Path) -> Path:
    """``ssh-keygen -Y sign -f KEY -n fasttrack FILE`` writes FILE.sig."""
    if not Path(key).is_file():
        raise UsageError(f"{key}: signing key not found")
    proc = subprocess.run(
        [_ssh_keygen(), "-Y", "sign", "-f", str(key), "-n", SIGNING_NAMESPACE, str(path)],
        capture_output=True,
        text=True,
        timeout=_SSH_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise UsageError(f"{key}: ssh-keygen could not sign {path.name}: {proc.stderr.strip()}")
    return path.with_name(path.name + ".sig")


def verify_signature(path: Path, signature: Path, allowed_signers: Path) -> tuple[bool, str]:
    """Find the signer among the allowed signers and check the signature. (ok, message)."""
    tool = _ssh_keygen()
    found = subprocess.run(
        [tool, "-Y", "find-principals", "-s", str(signature), "-f", str(allowed_signers)],
        capture_output=True,
        text=True,
        timeout=_SSH_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    principals = [p for p in found.stdout.split() if p]
    if found.returncode != 0 or not principals:
        return False, f"the signature's key is not in {allowed_signers}"
    with open(path, "rb") as data:
        proc = subprocess.run(
            [
                tool,
                "-Y",
                "verify",
                "-f",
                str(allowed_signers),
                "-I",
                principals[0],
                "-n",
                SIGNING_NAMESPACE,
                "-s",
                str(signature),
            ],
            stdin=data,
            capture_output=True,
            text=True,
            timeout=_SSH_TIMEOUT_S,
        )
    if proc.returncode != 0:
        return False, f"bad signature: {(proc.stderr or proc.stdout).strip()}"
    return True, f"signed by {principals[0]}"


def read_statement(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_capped(Path(path), SIDECAR_MAX_BYTES).decode("utf-8"))
    except InputTooLarge as err:
        raise UsageError(f"{path}: the attestation is {err}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UsageError(f"{path}: cannot read the attestation: {err}") from None
    if not isinstance(data, dict) or data.get("_type") != STATEMENT_TYPE:
        raise UsageError(f"{path}: not an in-toto Statement v1 (_type must be {STATEMENT_TYPE})")
    return data
