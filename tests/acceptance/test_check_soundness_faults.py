"""The example's planted faults of the soundness classes (issue #17), each failing the check meant
for it through the CLI on the CPU (mini_k3/faults.py):

- the candidate falls back to the stock path above batch 8 while its path counter still says
  latency_specialized: the switch's counter-based proof passes, the kernel census at the
  benchmarked batch 16 fails it (census equal to stock's, the counter disagreeing);
- the candidate is 3x slower at batch 8 only: the benchmark fails there ("not slower than stock":
  no promise on the CPU), batch 1 passes;
- the latency step is wrong at batch sizes 33..63 that are not multiples of 8: every declared
  point passes, the kernel tests between the points fail and name the sizes;
- the candidate's decode path gives non-finite logits after token id 200: the token-coverage
  probe fails and names it.

Each check runs on a copy of the example's manifest cut to TP 1 on the CPU and to the one check.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.mini_k3_cut import cpu_tp1_switches

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mini-k3"

pytestmark = pytest.mark.slow


def manifest(tmp: Path, options: dict[str, Any], **sections: Any) -> Path:
    m = yaml.safe_load((EXAMPLE / "fasttrack.yaml").read_text(encoding="utf-8"))
    m["scope"]["hardware"] = [
        {"accelerator": "cpu", "device_counts": [1], "tensor_parallel": [1], "interconnect": "loopback"}
    ]
    m["scope"]["parallelism"] = {"tensor": [1], "expert": [1], "decode_context": [1]}
    # the TP 1 CPU cut: the switches with an effect only at TP > 1 or on the H200 go, and so do
    # the census rules of other accelerators
    cpu_tp1_switches(m)
    m["target"] = {
        "kind": "python",
        "python": {"factory": "mini_k3.faults:create", "path": str(EXAMPLE), "options": options},
    }
    for name in (
        "kernel_tests",
        "evals",
        "divergence",
        "features",
        "benchmarks",
        "audits",
        "ablation",
        "stock_unchanged",
    ):
        m.pop(name, None)
    m["preserve"] = {"full_context": True, "temperature_sampling": True, "structured_output": True}
    m.update(sections)
    for e in m.get("evals") or ():
        e["data_files"] = str(EXAMPLE / "data" / "eval" / Path(e["data_files"]).name)
    path = tmp / "fasttrack.yaml"
    path.write_text(yaml.safe_dump(m, sort_keys=False), encoding="utf-8")
    return path


def check(tmp: Path, path: Path, only: str) -> tuple[int, dict[str, Any], str]:
    out = tmp / "out"
    env = {**os.environ, "FASTTRACK_CACHE_DIR": str(tmp / "cache"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fasttrack",
            "check",
            str(path),
            "--only",
            only,
            "--out",
            str(out),
            "--no-reports",
            "-q",
        ],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    evidence = json.loads((out / "evidence.json").read_text()) if (out / "evidence.json").exists() else {}
    return done.returncode, evidence, done.stdout + done.stderr


def decode_benchmark(batches: list[int], output_tokens: int = 16) -> dict[str, Any]:
    return {
        "id": "decode-per-user",
        "metric": "decode_tokens_per_s_per_user",
        "points": {"batch": batches, "tensor_parallel": [1]},
        "workload": {"kind": "synthetic", "input_tokens": 32, "output_tokens": output_tokens, "requests": 8},
        "setups": {"baseline": {"switch": False}, "candidate": {"switch": True}},
        "alpha": 0.001,
    }


def test_fallback_with_a_lying_counter_fails_the_census_proof_not_the_counter(tmp_path):
    path = manifest(tmp_path, {"path_fallback_above": 8}, benchmarks=[decode_benchmark([1, 16], output_tokens=8)])
    code, evidence, text = check(tmp_path, path, "switch,benchmarks")
    assert code == 1 and evidence["verdict"]["status"] == "FAIL", text
    switch = {c["id"]: c for c in evidence["checks"] if c["kind"] == "switch"}
    (counter,) = [c for i, c in switch.items() if "#census" not in i]
    assert counter["status"] == "passed"  # the counter lies: latency_specialized at every batch size
    census = {c["scope_point"]["batch"]: c for i, c in switch.items() if i.endswith("#census")}
    assert census[1]["status"] == "passed", census[1]["reason"]
    above = census[16]
    assert above["status"] == "failed" and above["reason_code"] == "path_not_exercised"
    assert "the candidate's census equals stock's" in above["reason"]
    assert "the counter disagrees with the census" in above["reason"]
    assert (
        above["measurements"]["kernels_per_layer"]["candidate"]
        == above["measurements"]["kernels_per_layer"]["baseline"]
    )


def test_a_slowdown_at_one_batch_size_fails_the_benchmark_there(tmp_path):
    path = manifest(tmp_path, {"slow_at_batch": 8, "slowdown": 3.0}, benchmarks=[decode_benchmark([1, 8])])
    code, evidence, text = check(tmp_path, path, "benchmarks")
    assert code == 1, text
    bench = {c["scope_point"]["batch"]: c for c in evidence["checks"] if c["kind"] == "benchmarks"}
    slow = bench[8]
    assert slow["status"] == "failed" and slow["reason_code"] == "regression"
    assert "slower than stock by more than the declared 5% at this in-scope point" in slow["reason"]
    assert slow["measurements"]["pairs"] >= 10
    assert bench[1]["status"] != "failed"


def test_a_kernel_wrong_between_the_declared_points_fails_only_between_them(tmp_path):
    # kernel test paths are the repository's own (validate refuses absolute ones): a copy in the project
    shutil.copytree(EXAMPLE / "tests" / "kernels", tmp_path / "kernels")
    suite = {
        "id": "latency-step",
        "paths": ["kernels/test_latency_path.py::test_decode_step_matches_stock"],
        "covers": ["batch"],
        "env": {"MINIK3_PLANTED_FAULT": "kernel_wrong_between"},
        "timeout_s": 600,
    }
    path = manifest(tmp_path, {}, kernel_tests=[suite])
    data = yaml.safe_load(path.read_text())
    data["scope"]["dtypes"] = ["fp32"]
    data["scope"].pop("speculative", None)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    code, evidence, text = check(tmp_path, path, "kernels")
    assert code == 1, text
    kernels = {
        c["id"]: c for c in evidence["checks"] if c["kind"] == "kernels" and c["scope_point"]["accelerator"] == "cpu"
    }
    declared = [c for i, c in kernels.items() if ":between" not in i]
    assert declared and all(c["status"] == "passed" for c in declared)  # 1, 3, 8, 17, 32, 64 are right
    (between,) = [c for i, c in kernels.items() if ":between" in i]
    assert between["status"] == "failed" and between["reason_code"] == "test_failed"
    wrong = [b for b in range(33, 64) if b % 8]
    assert between["measurements"]["batch_sizes"]["failed"] == wrong
    assert "batch size(s) 33, 34" in between["reason"]


def test_one_bad_token_id_fails_the_token_coverage_probe_and_is_named(tmp_path):
    features = {name: {"enabled": False} for name in ("full_context", "temperature_sampling", "structured_output")}
    features["token_coverage"] = {"batch": 64, "length": 32}
    path = manifest(tmp_path, {"bad_token_id": 200}, features=features)
    data = yaml.safe_load(path.read_text())
    data["preserve"]["token_coverage"] = True
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    code, evidence, text = check(tmp_path, path, "features")
    assert code == 1, text
    (probe,) = [c for c in evidence["checks"] if c["kind"] == "features" and c["name"] == "token_coverage"]
    assert probe["status"] == "failed" and "decode: non-finite logits after token id(s) 200" in probe["reason"]
    paths = probe["measurements"]["details"]["paths"]
    assert paths["prefill"]["non_finite_ids"] == [] and paths["decode"]["non_finite_ids"] == [200]
