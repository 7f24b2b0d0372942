"""The committed whole-scope verdict of the example (issue #22) must stay what it claims: a PASS of
every declared scope point of every kind, of the manifest in this repository. A change to
examples/mini-k3/fasttrack.yaml makes it stale; this test then says so, and the fix is a new
whole-scope run (scripts/device/h200_full_scope.sh and the CPU part), not an edit here."""

from __future__ import annotations

import json

from fasttrack.kinds.registry import KINDS
from fasttrack.verification.verify import VerifyOptions, verify
from support.paths import ROOT

RESULTS = ROOT / "benchmarks" / "results" / "mini-k3-full-scope"
MANIFEST = ROOT / "examples" / "mini-k3" / "fasttrack.yaml"


def test_the_committed_whole_scope_evidence_verifies_against_the_example_manifest():
    result = verify(VerifyOptions(RESULTS / "evidence.json", manifest=MANIFEST), KINDS)
    assert result.ok, [f"{f.name}: {f.message}" for f in result.failures]
    names = {f.name for f in result.findings}
    assert {"whole-scope", "plan", "measurements", "verdict", "digest"} <= names
    # A merged run names every machine its outcomes ran on, not only the first part's.
    hardware = next(f.message for f in result.findings if f.name == "hardware")
    assert "cpu (" in hardware and "NVIDIA H200 (" in hardware, hardware


def test_it_covers_both_accelerators_and_every_kind_with_nothing_left_out():
    evidence = json.loads((RESULTS / "evidence.json").read_text())
    required = [c for c in evidence["checks"] if c["required"]]
    assert evidence["verdict"]["status"] == "PASS"
    assert required and all(c["status"] == "passed" for c in required)
    accelerators = {c["scope_point"].get("accelerator") for c in required if c["scope_point"]}
    assert accelerators == {"cpu", "NVIDIA H200"}
    run = evidence["run"]
    assert run["only"] == [] and run["skip"] == [] and run["shard"] is None and not run.get("hardware")
