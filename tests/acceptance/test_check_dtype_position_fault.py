"""The dtype x position class of issue #34 on the real example model: a candidate whose latency
path builds its attention mask in the model's dtype (mini_k3/faults.py ``mask_in_model_dtype``) is
bit for bit the real path at fp32 and wrong at bf16 only past position 256, where bf16 stops
holding every integer. Before #34 every end-to-end check ran the target's default fp32 and it
passed; now divergence runs at every dtype the scope declares: the fault fails it at bf16 past
256 and passes it at fp32, and the clean candidate passes it at bf16.

One `fasttrack check --only divergence` per candidate, through the CLI, on a copy of the example's
manifest cut to TP 1 on the CPU, its longest MRCR prompt teacher-forced to 16 positions past 256.
"""

from __future__ import annotations

import json
import os
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
EDGES = [0, 256, 272]  # positions before bf16's integer limit, and 16 past it

pytestmark = pytest.mark.slow


def manifest(tmp: Path, name: str, options: dict[str, Any], dtypes: list[str]) -> Path:
    m = yaml.safe_load((EXAMPLE / "fasttrack.yaml").read_text(encoding="utf-8"))
    m["scope"]["hardware"] = [
        {"accelerator": "cpu", "device_counts": [1], "tensor_parallel": [1], "interconnect": "loopback"}
    ]
    m["scope"]["parallelism"] = {"tensor": [1], "expert": [1], "decode_context": [1]}
    m["scope"]["dtypes"] = dtypes
    cpu_tp1_switches(m)
    m["target"] = {
        "kind": "python",
        "python": {"factory": "mini_k3.faults:create", "path": str(EXAMPLE), "options": options},
    }
    mrcr = next(e for e in m["evals"] if e["id"] == "mrcr")
    mrcr["data_files"] = str(longest_mrcr_row(tmp))  # the prompt divergence takes, alone: less to load
    m["evals"] = [mrcr]
    m["divergence"] = {"prompts_from": "mrcr", "buckets": EDGES, "max_prompts": 1}
    for section in ("kernel_tests", "features", "benchmarks", "audits", "ablation", "stock_unchanged"):
        m.pop(section, None)
    folder = tmp / name
    folder.mkdir()
    path = folder / "fasttrack.yaml"
    path.write_text(yaml.safe_dump(m, sort_keys=False), encoding="utf-8")
    return path


def longest_mrcr_row(tmp: Path) -> Path:
    path = tmp / "mrcr_longest.jsonl"
    if not path.exists():
        rows = (EXAMPLE / "data" / "eval" / "mrcr.jsonl").read_text(encoding="utf-8").splitlines()
        path.write_text(max(rows, key=lambda row: json.loads(row)["n_chars"]) + "\n", encoding="utf-8")
    return path


def start(path: Path) -> subprocess.Popen[str]:
    folder = path.parent
    env = {**os.environ, "FASTTRACK_CACHE_DIR": str(folder / "cache"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "fasttrack", "check", str(path), "--only", "divergence"]
    return subprocess.Popen(
        [*command, "--out", str(folder / "out"), "--no-reports", "-q"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(process: subprocess.Popen[str], path: Path) -> tuple[int, dict[str, Any], str]:
    text, _ = process.communicate(timeout=600)
    evidence_path = path.parent / "out" / "evidence.json"
    evidence = json.loads(evidence_path.read_text()) if evidence_path.exists() else {}
    return process.returncode, evidence, text


def by_dtype(evidence: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = [c for c in evidence["checks"] if c["kind"] == "divergence"]
    return {c["scope_point"]["dtype"]: c for c in found}


def test_a_mask_built_in_bf16_fails_divergence_at_bf16_only_and_the_clean_path_passes_there(tmp_path):
    faulty = manifest(tmp_path, "faulty", {"mask_in_model_dtype": True}, ["fp32", "bf16"])
    clean = manifest(tmp_path, "clean", {}, ["bf16"])
    runs = [(start(faulty), faulty), (start(clean), clean)]  # side by side, one core each
    (code, evidence, text), (clean_code, clean_evidence, clean_text) = (finish(p, path) for p, path in runs)

    assert code == 1 and evidence["verdict"]["status"] == "FAIL", text
    checks = by_dtype(evidence)
    assert set(checks) == {"fp32", "bf16"}
    fp32, bf16 = checks["fp32"], checks["bf16"]
    # fp32 holds every integer the mask compares: the real path bit for bit (its reordering
    # against stock alone, ~1e-7 nats)
    assert fp32["status"] == "passed", fp32["reason"]
    assert all(b["max_kl"] < 1e-5 for b in fp32["measurements"]["buckets"])
    assert bf16["status"] == "failed" and bf16["reason_code"] == "regression", bf16["reason"]
    near, far = bf16["measurements"]["buckets"]
    assert near["name"] == "0-256" and near["passed"]  # integers up to 256 are exact in bf16 too
    assert far["name"] == "256-272" and not far["passed"] and far["mean_kl"] > 0.25
    assert "bucket(s) 256-272:" in bf16["reason"] and "0-256" not in bf16["reason"]

    assert clean_code == 0 and clean_evidence["verdict"]["status"] == "PASS", clean_text
    (clean_bf16,) = by_dtype(clean_evidence).values()
    assert clean_bf16["status"] == "passed" and clean_bf16["scope_point"]["dtype"] == "bf16"
    assert all(b["passed"] for b in clean_bf16["measurements"]["buckets"])
