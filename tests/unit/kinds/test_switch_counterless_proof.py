"""A proof of path with no counter (#36 item 2): a server's own log (``proof.source: log``) or its
kernel census (``proof.source: census``) proves the optimised path ran, for the PRs that add no
metric. The log proof runs end to end against the fake OpenAI server (it logs the backend line
when started with --fast); the census proof's rules are judged on recorded censuses, and a server
without vLLM's profiler leaves it not run, never passed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fasttrack.environment import Environment
from fasttrack.errors import ManifestError
from fasttrack.evidence import Status
from fasttrack.kinds.context import RunContext
from fasttrack.kinds.reading import Subject
from fasttrack.kinds.registry import KINDS
from fasttrack.kinds.switch import rule as switch_rule
from fasttrack.kinds.switch import run as switch_runner
from fasttrack.kinds.switch.census_proof import census_problems
from fasttrack.manifest import load_manifest
from fasttrack.plan import build_plan

SUPPORT = Path(__file__).resolve().parents[2] / "support"
CPU = Environment("cpu", (), "test", "loopback", "cpu", 2, "Linux", "3.11")

MANIFEST = """\
fasttrack: 1
optimisation: {id: moe, title: moe}
model: {id: org/a, code_paths: ["m/*.py"]}
switch:
  name: fast
  default: false
  enable: {server_flag: --fast}
  proof: PROOF
scope:
  hardware: [{accelerator: cpu, device_counts: [1], tensor_parallel: [1]}]
  batch: {min: 1, max: 2, points: [1, 2]}
preserve: {full_context: true, temperature_sampling: true, structured_output: true}
target:
  kind: openai
  openai:
    baseline: {command: [PY, SERVER, --port, "{port}"]}
    candidate: {command: [PY, SERVER, --port, "{port}", --fast], env: {ENV}}
    startup_timeout_s: 20
"""
LOG_PROOF = '{source: log, log_signature: "Using the fast decode backend"}'
CENSUS_PROOF = '{source: census, census: {kernels_present: [fused_topk], kernels_absent: ["^topk$"]}}'


def manifest(tmp_path: Path, proof: str, env: str = "") -> Path:
    text = MANIFEST.replace("PROOF", proof).replace("PY", sys.executable)
    text = text.replace("SERVER", str(SUPPORT / "fake_openai_server.py")).replace("{ENV}", "{" + env + "}")
    (tmp_path / "fasttrack.yaml").write_text(text)
    (tmp_path / ".git").mkdir(exist_ok=True)
    return tmp_path / "fasttrack.yaml"


def proof_of_path(tmp_path: Path, proof: str, env: str = ""):
    m = load_manifest(manifest(tmp_path, proof, env))
    [instance] = [i for i in build_plan(m, CPU, KINDS).instances if i.kind == "switch"]
    assert instance.runnable, instance.skip_reason
    return m, switch_runner.run(instance, RunContext(m, None, tmp_path, tmp_path / "a", 60.0))


@pytest.mark.slow
def test_the_servers_logs_alone_prove_the_path(tmp_path):
    m, outcome = proof_of_path(tmp_path, LOG_PROOF)
    assert outcome.status is Status.PASSED, outcome.reason
    assert outcome.measurements["log_signatures"] == {"baseline": {"fast": False}, "candidate": {"fast": True}}
    assert outcome.measurements["switches"]["fast"]["proven_by"] == "log"
    assert switch_rule.check(outcome.to_dict(), Subject(m, {})) == []
    # verify refuses a pass whose evidence shows the signature missing from the candidate's log
    forged = outcome.to_dict()
    forged["measurements"]["log_signatures"]["candidate"]["fast"] = False
    assert any("log signature says otherwise" in p for p in switch_rule.check(forged, Subject(m, {})))


@pytest.mark.slow
def test_a_silent_fallback_fails_the_log_proof(tmp_path):
    _m, outcome = proof_of_path(tmp_path, LOG_PROOF, "FAKE_FAST_FALLBACK: '1'")
    assert (outcome.status, outcome.reason_code) == (Status.FAILED, "path_not_exercised"), outcome.reason
    assert "never appeared in the candidate server's log" in outcome.reason


@pytest.mark.slow
def test_a_census_proof_on_servers_without_the_profiler_is_not_run(tmp_path):
    _m, outcome = proof_of_path(tmp_path, CENSUS_PROOF)
    assert (outcome.status, outcome.reason_code) == (Status.NOT_RUN, "dependency"), outcome.reason
    assert "--profiler-config" in outcome.reason


def census(*names: str) -> dict:
    counts = {n: 1.0 for n in names}
    n = float(len(names))
    return {
        "kernel_names": counts,
        "kernels_per_step": n,
        "kernels_per_layer": n,
        "layers_source": "divided_by_n_layers",
    }


@pytest.mark.parametrize(
    ("stock", "candidate", "problem"),
    [
        (("topk", "gemm"), ("fused_topk", "gemm"), None),  # the kernel replaced: a pass
        (("topk", "gemm"), ("topk", "gemm"), "equals stock's"),  # a fallback: the same step as stock's
        (("topk", "gemm"), ("topk", "fused_topk", "gemm"), "still in the candidate's decode step"),
        (("gemm",), ("fused_topk", "gemm"), "in stock's decode step either"),  # absence proves nothing
        (("topk", "gemm"), ("gemm", "topk_v2"), "no kernel matching 'fused_topk'"),
    ],
)
def test_census_rules_name_kernels_that_appear_and_vanish(tmp_path, stock, candidate, problem):
    m = load_manifest(manifest(tmp_path, CENSUS_PROOF))
    at_batches = {
        "baseline": {1: census(*stock), 2: census(*stock)},
        "candidate": {1: census(*candidate), 2: census(*candidate)},
    }
    measurements: dict = {}
    found = census_problems(m, {}, at_batches, measurements)
    assert set(measurements["census_by_batch"]) == {"1", "2"}
    if problem is None:
        assert found is None
    else:
        assert found is not None and found[:2] == (Status.FAILED, "path_not_exercised") and problem in found[2], found


@pytest.mark.parametrize(
    ("proof", "words"),
    [
        ("{source: log}", "needs 'log_signature'"),
        ("{source: census}", "needs 'census' rules"),
        ('{source: log, log_signature: "x", metric: steps, label: path}', "reads no counter"),
        ("{source: census, census: {kernels_absent: ['(']}}", r"kernels_absent\[0\]: not a regular expression"),
    ],
)
def test_validate_refuses_an_incomplete_counterless_proof(tmp_path, proof, words):
    with pytest.raises(ManifestError, match=words):
        load_manifest(manifest(tmp_path, proof))


def test_a_counterless_proof_needs_a_server_target(tmp_path):
    path = manifest(tmp_path, LOG_PROOF)
    text = path.read_text().split("target:")[0] + 'target:\n  kind: python\n  python: {factory: "tiny.target:create"}\n'
    path.write_text(text.replace("server_flag: --fast", "engine_arg: fast"))
    with pytest.raises(ManifestError, match="needs a server target"):
        load_manifest(path)
