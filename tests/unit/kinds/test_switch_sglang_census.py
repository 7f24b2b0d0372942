"""An SGLang switch proven by SGLang's own torch profiler (``proof.source: census`` on an
``sglang`` target, #36 item 2): both fake SGLang servers profile a few decode steps through
``/start_profile`` / ``/stop_profile`` into their ``SGLANG_TORCH_PROFILER_DIR``, and the census
rules judge the candidate's ``step[DECODE bs=B]`` spans against stock's. The radix-4 route kernel
of sglang#34490 in the candidate passes; a candidate that silently stays on aiter's top-k fails;
a profiler that writes no trace leaves the proof not run, never passed; validate refuses a census
proof where a side names no SGLANG_TORCH_PROFILER_DIR."""

from __future__ import annotations

import json
import os
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
from fasttrack.manifest import load_manifest
from fasttrack.plan import build_plan
from fasttrack.targets.sglang.profiler import SglangProfiler

FAKE = Path(__file__).resolve().parents[2] / "fixtures" / "sglang_bench" / "fake"
CPU = Environment("cpu", (), "test", "loopback", "cpu", 2, "Linux", "3.11")

MANIFEST = """\
fasttrack: 1
optimisation: {id: radix4, title: radix4}
model: {id: org/k3, code_paths: ["m/*.py"]}
switch:
  name: radix4_topk
  default: false
  enable: {env: "SGLANG_K3_RADIX4_TOPK=1"}
  proof:
    source: census
    census: {kernels_present: ["moe_route_radix4"], kernels_absent: ["biased_grouped_topk"]}
scope:
  hardware: [{accelerator: cpu, device_counts: [1], tensor_parallel: [1]}]
  batch: {min: 1, max: 2, points: [1, 2]}
preserve: {full_context: true, temperature_sampling: true, structured_output: true}
target:
  kind: sglang
  sglang:
    model_path: ckpt
    served_model_name: k3
    env: {ENV}
    startup_timeout_s: 30
"""
PROFILED = 'SGLANG_TORCH_PROFILER_DIR: "{server_dir}/traces"'


def manifest(tmp_path: Path, env: str = PROFILED, layers: int | None = 2) -> Path:
    if layers is not None:  # the checkpoint's layer count, read from --model-path's config.json
        (tmp_path / "ckpt").mkdir(exist_ok=True)
        (tmp_path / "ckpt" / "config.json").write_text(json.dumps({"num_hidden_layers": layers}))
    path = tmp_path / "fasttrack.yaml"
    path.write_text(MANIFEST.replace("{ENV}", "{" + env + "}"))
    return path


@pytest.fixture
def fake_sglang(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(FAKE))  # SGLang "installed" for the plan


def proof_of_path(tmp_path: Path, env: str = PROFILED, layers: int | None = 2):
    m = load_manifest(manifest(tmp_path, env, layers))
    [instance] = [i for i in build_plan(m, CPU, KINDS).instances if i.kind == "switch"]
    assert instance.runnable, instance.skip_reason
    outcome = switch_runner.run(instance, RunContext(m, None, tmp_path, tmp_path / "a", 60.0))
    assert switch_rule.check(outcome.to_dict(), Subject(m, {})) == []  # verify re-derives it alike
    return outcome


@pytest.mark.slow
def test_the_radix4_kernel_in_the_candidates_decode_steps_proves_the_switch(tmp_path, fake_sglang):
    outcome = proof_of_path(tmp_path)
    assert outcome.status is Status.PASSED, outcome.reason
    assert outcome.measurements["switches"]["radix4_topk"]["proven_by"] == "census"
    by_batch = outcome.measurements["census_by_batch"]
    assert set(by_batch) == {"1", "2"}
    differences = {d["name"]: (d["baseline"], d["candidate"]) for d in by_batch["2"]["census_differences"]}
    assert differences == {"sglang::moe_route_radix4": (0.0, 2.0), "aiter::biased_grouped_topk": (2.0, 0.0)}
    assert by_batch["1"]["census_problems"] == []
    # 9 top-level operators per decode step of the fake's 2 layers, on both sides
    assert by_batch["1"]["kernels_per_layer"] == {"baseline": 4.5, "candidate": 4.5}


@pytest.mark.slow
def test_a_candidate_silently_on_aiters_topk_fails_the_census_proof(tmp_path, fake_sglang):
    outcome = proof_of_path(tmp_path, f'{PROFILED}, FAKE_RADIX4_FALLBACK: "1"', layers=None)
    assert (outcome.status, outcome.reason_code) == (Status.FAILED, "path_not_exercised"), outcome.reason
    assert "no kernel matching 'moe_route_radix4'" in outcome.reason
    assert "aiter::biased_grouped_topk" in outcome.reason  # still in the candidate's decode step


@pytest.mark.slow
def test_a_profiler_that_writes_no_trace_leaves_the_proof_not_run(tmp_path, fake_sglang, monkeypatch):
    monkeypatch.setattr(SglangProfiler, "TRACE_WAIT_S", 0.5)
    outcome = proof_of_path(tmp_path, f'{PROFILED}, FAKE_PROFILER_BROKEN: "1"')
    assert (outcome.status, outcome.reason_code) == (Status.NOT_RUN, "dependency"), outcome.reason
    assert "no complete SGLang profiler trace" in outcome.reason


def test_validate_refuses_a_census_proof_on_sides_without_sglangs_profiler(tmp_path):
    with pytest.raises(ManifestError, match="servers name no SGLANG_TORCH_PROFILER_DIR") as err:
        load_manifest(manifest(tmp_path, 'OTHER: "1"'))
    assert "switch.proof.source" in str(err.value)
