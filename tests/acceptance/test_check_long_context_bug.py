"""The source article's lesson on the real example model: a candidate bug that perturbs decode
attention only past a context position fails MRCR in the long bins and the divergence check in
the far buckets, while everything before that position stays clean.

The bug (examples/mini-k3/mini_k3/faults.py) makes the latency path's decode attention read only
the first ``BUG_AFTER`` cache slots. The check runs through the CLI on a copy of the example's
manifest, shrunk to run in about a minute on two idle cores: two real MRCR rows of each length bin
of the shipped evaluation set (short bin: 810 and 799 prompt tokens, + at most 80 generated, all
below the bug; longer bins: 1,599 tokens and more, all past it), TP 1, one divergence prompt
teacher-forced just past the bug's position.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support.mini_k3_cut import cpu_tp1_switches

pytest.importorskip("lm_eval")
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mini-k3"
MRCR_DATA = EXAMPLE / "data" / "eval" / "mrcr.jsonl"
BUG_AFTER = 896  # tokens: past the short-bin rows + answers, before every longer-bin prompt
BIN_EDGES = [0, 1024, 2048, 4096]  # the example manifest's MRCR bins (characters)
# Rows (0-based, file order) of each bin that the stock path answers exactly: the first two of each
# bin but the long bin's first two, which the stock model misses (a wrong random prefix, other
# words; `python -m mini_k3.evaluate_accuracy --sets mrcr --responses F` lists every response).
# A bin whose baseline already fails cannot show the bug with two items.
ROWS = {0: (0, 1), 1: (80, 81), 2: (162, 163)}

pytestmark = pytest.mark.slow


def mrcr_subset(path: Path) -> Path:
    """The ROWS of the example's MRCR set, checked to lie in the bins they stand for."""
    lines = MRCR_DATA.read_text(encoding="utf-8").splitlines()
    taken = []
    for b, indices in ROWS.items():
        for i in indices:
            assert BIN_EDGES[b] <= json.loads(lines[i])["n_chars"] < BIN_EDGES[b + 1], (b, i)
            taken.append(lines[i])
    path.write_text("".join(line + "\n" for line in taken), encoding="utf-8")
    return path


def small_manifest(tmp: Path, bug_after: int | None) -> Path:
    """The example manifest, cut down to MRCR + divergence at TP 1 on CPU, with the fault factory."""
    m = yaml.safe_load((EXAMPLE / "fasttrack.yaml").read_text(encoding="utf-8"))
    m["scope"]["hardware"] = [
        {"accelerator": "cpu", "device_counts": [1], "tensor_parallel": [1], "interconnect": "loopback"}
    ]
    m["scope"]["parallelism"] = {"tensor": [1], "expert": [1], "decode_context": [1]}
    m["scope"]["dtypes"] = ["fp32"]  # the bug is in every dtype: one divergence instance suffices
    options = {"long_context_bug_after": bug_after} if bug_after is not None else {}
    m["target"] = {
        "kind": "python",
        "python": {"factory": "mini_k3.faults:create", "path": str(EXAMPLE), "options": options},
    }
    mrcr = next(e for e in m["evals"] if e["id"] == "mrcr")
    mrcr.update(
        data_files=str(mrcr_subset(tmp / "mrcr_subset.jsonl")),
        limit=None,
        bins={"field": "n_chars", "edges": BIN_EDGES},
        generation={"temperature": 0.0, "max_tokens": 80, "seed": 1234},
    )
    mrcr.pop("sequential", None)
    m["evals"] = [mrcr]
    # teacher forcing through the decode path costs one step per token: one prompt, just past the bug
    m["divergence"] = {
        "prompts_from": "mrcr",
        "buckets": [0, BUG_AFTER // 2, BUG_AFTER, BUG_AFTER + 64],
        "max_prompts": 1,
        "max_mean_kl": 0.01,
        "max_p99_kl": 0.1,
        "min_top1_agreement": 0.98,
    }
    for section in ("kernel_tests", "features", "benchmarks", "audits", "ablation", "stock_unchanged"):
        m.pop(section, None)
    # the TP 1 CPU cut of the scope: the switches with an effect only at TP > 1 or on the H200 go too
    cpu_tp1_switches(m)
    path = tmp / "fasttrack.yaml"
    path.write_text(yaml.safe_dump(m, sort_keys=False), encoding="utf-8")
    return path


def check(tmp: Path, manifest: Path) -> tuple[int, dict, str]:
    out = tmp / "out"
    # one torch thread: on a shared 2-core machine two spinning threads per process make each
    # decode step ~40x slower (measured: 745 vs 16 ms); a single thread loses little when idle
    env = {**os.environ, "FASTTRACK_CACHE_DIR": str(tmp / "cache"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fasttrack",
            "check",
            str(manifest),
            "--only",
            "evals,divergence",
            "--out",
            str(out),
            "--no-reports",
            "-q",
        ],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    evidence = json.loads((out / "evidence.json").read_text()) if (out / "evidence.json").exists() else {}
    return done.returncode, evidence, done.stdout + done.stderr


def only(evidence: dict, kind: str) -> dict:
    found = [c for c in evidence["checks"] if c["kind"] == kind]
    assert len(found) == 1, [(c["id"], c["status"]) for c in found]
    return found[0]


def test_long_context_attention_bug_fails_long_bins_and_far_buckets(tmp_path):
    code, evidence, text = check(tmp_path, small_manifest(tmp_path, BUG_AFTER))
    assert code == 1 and evidence["verdict"]["status"] == "FAIL", text

    mrcr = only(evidence, "evals")
    m = mrcr["measurements"]
    assert mrcr["status"] == "failed" and mrcr["reason_code"] == "regression", mrcr["reason"]
    bins = {b["name"]: b for b in m["bins"]}
    assert list(bins) == ["0-1024", "1024-2048", "2048-4096"]
    assert [b["n"] for b in bins.values()] == [len(rows) for rows in ROWS.values()]
    short = bins["0-1024"]
    # untouched below the bug's position: identical answers; too few items to pass, never failed
    assert short["diff"] == 0 and short["status"] == "not_run" and "underpowered" in short["reason"]
    for name in ("1024-2048", "2048-4096"):
        long_ = bins[name]
        # the rule's one-sided bound (at n = 2 the two-sided 95 % interval is far wider)
        assert long_["status"] == "failed" and long_["upper_bound"] < -m["margin"], long_
        assert long_["baseline_mean"] > 0.3 and long_["candidate_mean"] < long_["baseline_mean"] - 0.2
    assert mrcr["reason"].startswith("bin(s) 1024-2048, 2048-4096: regression beyond the margin 0.05 (1024-2048: diff")
    changed = [s for s in m["samples"] if s["changed"]]
    assert {s["bin"] for s in changed} == {"1024-2048", "2048-4096"}

    div = only(evidence, "divergence")
    assert div["status"] == "failed" and div["reason_code"] == "regression", div["reason"]
    buckets = {b["name"]: b for b in div["measurements"]["buckets"]}
    half = BUG_AFTER // 2
    near, mid, far = buckets[f"0-{half}"], buckets[f"{half}-{BUG_AFTER}"], buckets[f"{BUG_AFTER}-{BUG_AFTER + 64}"]
    assert near["passed"] and mid["passed"] and near["mean_kl"] < 1e-6 and mid["mean_kl"] < 1e-6
    assert not far["passed"] and far["mean_kl"] > 0.01 and far["top1_agreement"] < 0.98
    assert f"bucket(s) {BUG_AFTER}-{BUG_AFTER + 64}:" in div["reason"] and f"0-{half}" not in div["reason"]
