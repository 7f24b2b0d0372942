"""The committed whole-scope evidence of the example (issue #22, head 91d882a) is a record of that
run under the rules of its time: intact (its digest matches its attestation), PASS of every
declared scope point of every kind on both accelerators. The gate has since grown rules it could
not have met, and `verify` must say exactly which, not pass it: the example manifest gained the
mixed-batches probe, divergence and the full-context probe at each dtype and the context-edge kernel
suite, and the speculative check judges acceptance against stock (#34), and verify checks every
artifact's digest while the commit kept the evidence without its 82 artifacts (#35).
A new whole-scope run (scripts/device/h200_full_scope.sh and the CPU part) replaces it; until then
this test holds the record honest."""

from __future__ import annotations

import json

from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.verification.coverage import plan_problems
from fasttrack.verification.verify import VerifyOptions, verify
from support.paths import ROOT

RESULTS = ROOT / "benchmarks" / "results" / "mini-k3-full-scope"
MANIFEST = ROOT / "examples" / "mini-k3" / "fasttrack.yaml"


def test_the_record_is_intact_and_verify_names_each_rule_it_predates():
    result = verify(VerifyOptions(RESULTS / "evidence.json", manifest=MANIFEST), KINDS)
    found = {f.name: f for f in result.findings}
    for intact in ("canonical", "digest", "hardware", "whole-scope", "verdict-consistent", "verdict"):
        assert found[intact].ok, found[intact].message
    # A merged run names every machine its outcomes ran on, not only the first part's.
    assert "cpu (" in found["hardware"].message and "NVIDIA H200 (" in found["hardware"].message
    stale = {f.name for f in result.failures}
    assert stale == {"manifest", "measurements", "plan", "artifacts"}, stale
    assert "no acceptance length of stock" in found["measurements"].message
    assert "difference(s) between the outcomes and the plan" in found["plan"].message
    evidence = json.loads((RESULTS / "evidence.json").read_text())
    missing = " ".join(plan_problems(evidence, load_manifest(MANIFEST), KINDS))
    for planned in (
        "features/mixed_batches@",
        "divergence/token_kl@accelerator=cpu,device_count=1,dtype=bf16,tensor_parallel=1",
        "features/full_context@accelerator=NVIDIA H200,device_count=1,dtype=bf16,tensor_parallel=1",
        "kernels/mini-k3-context-edges@accelerator=NVIDIA H200,context=4096,device_count=1,dtype=bf16",
    ):
        assert planned in missing, planned
    assert "missing" in found["artifacts"].message


def test_it_covers_both_accelerators_and_every_kind_with_nothing_left_out():
    evidence = json.loads((RESULTS / "evidence.json").read_text())
    required = [c for c in evidence["checks"] if c["required"]]
    assert evidence["verdict"]["status"] == "PASS"
    assert required and all(c["status"] == "passed" for c in required)
    accelerators = {c["scope_point"].get("accelerator") for c in required if c["scope_point"]}
    assert accelerators == {"cpu", "NVIDIA H200"}
    run = evidence["run"]
    assert run["only"] == [] and run["skip"] == [] and run["shard"] is None and not run.get("hardware")
