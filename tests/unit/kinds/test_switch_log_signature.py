"""A server's proof of path from its log (fasttrack.kinds.switch.log_signature): the signature
must appear on the candidate's log and never on stock's; no log to search is an error, not a pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from fasttrack.errors import ManifestError
from fasttrack.evidence import Status
from fasttrack.kinds.switch.log_signature import log_signature_problems, signatures_in_logs
from fasttrack.manifest import load_manifest

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "manifests" / "valid" / "log-signature.yaml"
LINE = "INFO 12-06 layer.py:88] Using FlashInfer moe_ep mega-MoE backend\n"


def logs(tmp_path: Path, side: str, text: str) -> list[Path]:
    path = tmp_path / f"server-{side}.log"
    path.write_text("INFO starting\n" + text + "INFO ready\n")
    return [path]


def test_the_signature_must_show_on_the_candidate_only(tmp_path):
    manifest = load_manifest(FIXTURE)
    stock = signatures_in_logs(manifest, logs(tmp_path, "baseline", ""))
    candidate = signatures_in_logs(manifest, logs(tmp_path, "candidate", LINE))
    assert (stock, candidate) == ({"mega_moe": False}, {"mega_moe": True})
    assert log_signature_problems(manifest, {}, {"baseline": stock, "candidate": candidate}) is None
    # a fallback to stock: the candidate never printed it
    status, code, reason = log_signature_problems(manifest, {}, {"baseline": stock, "candidate": stock})
    assert (status, code) == (Status.FAILED, "path_not_exercised") and "candidate" in reason
    # the switch leaking into stock
    status, code, _ = log_signature_problems(manifest, {}, {"baseline": candidate, "candidate": candidate})
    assert (status, code) == (Status.FAILED, "switch_default_on")
    # a server fasttrack did not start has no log: not a pass
    none = signatures_in_logs(manifest, [])
    status, code, _ = log_signature_problems(manifest, {}, {"baseline": none, "candidate": none})
    assert (status, code) == (Status.ERRORED, "target")


def test_validate_refuses_a_bad_pattern_and_an_in_process_target(tmp_path):
    text = FIXTURE.read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace('"Using FlashInfer moe_ep mega-MoE backend"', '"Using (unclosed"'))
    with pytest.raises(ManifestError, match="log_signature: not a regular expression"):
        load_manifest(bad)
    python = tmp_path / "python.yaml"
    python.write_text(text.split("target:")[0] + 'target:\n  kind: python\n  python: {factory: "tiny.target:create"}\n')
    with pytest.raises(ManifestError, match="needs a server target"):
        load_manifest(python)
