"""`fasttrack check` on an sglang target, as a process, against the fake SGLang package on
PYTHONPATH (tests/fixtures/sglang_bench/fake: no SGLang is installed here): the run's shared
servers are SGLang launch commands, the switch's proof reads their /metrics, the sglang_bench
benchmark times `python -m sglang.bench_serving` in pairs, and the engine build is each server's
/get_server_info version."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.projects import commit_all

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "sglang_bench" / "fake"

MANIFEST = """\
fasttrack: 1
optimisation: {id: sgl, title: an SGLang switch}
model: {id: org/m, code_paths: ["m/**"]}
switch:
  name: fast
  default: false
  enable: {env: FAKE_FAST=1}
  proof: {source: metrics, metric: "sglang:fake_steps_total", label: path}
scope:
  hardware: [{accelerator: cpu, device_counts: [1], tensor_parallel: [1]}]
preserve: {full_context: true, temperature_sampling: true, structured_output: true}
target:
  kind: sglang
  sglang:
    model_path: ckpt
    served_model_name: m
    server_args: [--enable-metrics]
    startup_timeout_s: 60
benchmarks:
  - id: decode
    metric: median_tpot_ms
    workload: {kind: sglang_bench, input_len: 1024, output_len: 128, num_prompts: 16, max_concurrency: 4, repetitions: 3}
"""


def test_check_runs_the_switch_proof_and_sglang_bench_on_shared_sglang_servers(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "a.py").write_text("x = 1\n")
    (tmp_path / "fasttrack.yaml").write_text(MANIFEST)
    commit_all(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKE), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "fasttrack", "check", "--only", "switch,benchmarks", "--out", "out", "fasttrack.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout
    progress = done.stderr
    assert "passed  switch/fast@" in progress and "passed  benchmarks/decode@" in progress
    evidence = json.loads((tmp_path / "out" / "evidence.json").read_text())
    builds = evidence["engine_build"]
    assert {builds[side]["version"] for side in ("baseline", "candidate")} == {"0.5.2"}
    assert all(builds[side]["source"].endswith("/get_server_info") for side in ("baseline", "candidate"))
