"""The drafter and mixed-batch classes of issue #34 on the real example model, through the CLI.

Two candidates planted in the example's own fault set (mini_k3/faults.py), each beside the clean
candidate, one `fasttrack check --only ...` per candidate on a copy of the example's manifest cut
to TP 1 on the CPU and to what the check needs:

- ``draft_off_by_one``: the candidate's n-gram drafter proposes the continuation one token late at
  two of every three drafting steps. Greedy output stays equal and the acceptance length stays
  above the example's floor of 1.2, so the floor alone passes it; the comparison with stock on the
  same prompts (at least 90 % of stock's acceptance length) fails it at every draft length.
- ``first_row_sampling``: the candidate's batch sampler samples every row of a step with the first
  row's temperature and top_p. Every request alone is served right; the mixed-batch probe (one
  batch of rows that differ in every per-request parameter) fails it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.mini_k3_cut import cpu_tp1_switches

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mini-k3"
DRAFT_LENGTHS = [1, 4]  # stock's acceptance differs at 1 (1.75) and 2-7 (2.04): one of each

pytestmark = pytest.mark.slow


def manifest(tmp: Path, name: str, options: dict[str, Any], cut: Callable[[dict[str, Any]], None]) -> Path:
    m = yaml.safe_load((EXAMPLE / "fasttrack.yaml").read_text(encoding="utf-8"))
    m["scope"]["hardware"] = [
        {"accelerator": "cpu", "device_counts": [1], "tensor_parallel": [1], "interconnect": "loopback"}
    ]
    m["scope"]["parallelism"] = {"tensor": [1], "expert": [1], "decode_context": [1]}
    cpu_tp1_switches(m)
    m["target"] = {
        "kind": "python",
        "python": {"factory": "mini_k3.faults:create", "path": str(EXAMPLE), "options": options},
    }
    for section in ("evals", "divergence", "kernel_tests", "benchmarks", "audits", "ablation", "stock_unchanged"):
        m.pop(section, None)
    cut(m)
    folder = tmp / name
    folder.mkdir()
    path = folder / "fasttrack.yaml"
    path.write_text(yaml.safe_dump(m, sort_keys=False), encoding="utf-8")
    return path


def speculative_only(m: dict[str, Any]) -> None:
    """The speculative check at two draft lengths (the example's floor and margin kept)."""
    m["scope"]["speculative"]["draft_lengths"] = DRAFT_LENGTHS
    m.pop("features", None)


def mixed_batches_only(m: dict[str, Any]) -> None:
    """The mixed-batch probe alone, with the example's settings (the others stay preserved, unprobed)."""
    for name, settings in m["features"].items():
        if name != "mixed_batches":
            settings["enabled"] = False


def start(path: Path, only: str) -> subprocess.Popen[str]:
    folder = path.parent
    env = {**os.environ, "FASTTRACK_CACHE_DIR": str(folder / "cache"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "fasttrack", "check", str(path), "--only", only]
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


def side_by_side(tmp: Path, option: str, cut: Callable[[dict[str, Any]], None], only: str) -> list[Any]:
    """The faulty and the clean candidate's checks, at once (one core each)."""
    faulty = manifest(tmp, "faulty", {option: True}, cut)
    clean = manifest(tmp, "clean", {}, cut)
    runs = [(start(faulty, only), faulty), (start(clean, only), clean)]
    return [finish(p, path) for p, path in runs]


def checks(evidence: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [c for c in evidence["checks"] if c["kind"] == kind]


def test_a_drafter_off_by_one_fails_acceptance_against_stock_above_the_floor_and_the_clean_drafter_passes(tmp_path):
    (code, evidence, text), (clean_code, clean_evidence, clean_text) = side_by_side(
        tmp_path, "draft_off_by_one", speculative_only, "speculative"
    )

    assert code == 1 and evidence["verdict"]["status"] == "FAIL", text
    faulty = {c["scope_point"]["draft_length"]: c for c in checks(evidence, "speculative")}
    assert set(faulty) == set(DRAFT_LENGTHS)
    for draft_length, check in faulty.items():
        m = check["measurements"]
        assert check["status"] == "failed" and check["reason_code"] == "regression", check["reason"]
        assert f"below stock's {m['stock_acceptance_length']:.2f} on the same prompts" in check["reason"]
        assert m["greedy_equal"] is True  # verification rejected the late drafts: output unchanged
        # above the declared floor: the floor alone would have passed it
        assert m["acceptance_length"] >= m["min_acceptance_length"] == 1.2, draft_length
        assert m["acceptance_ratio"] < 0.85 and m["acceptance_margin"] == 0.1

    assert clean_code == 0 and clean_evidence["verdict"]["status"] == "PASS", clean_text
    clean = {c["scope_point"]["draft_length"]: c for c in checks(clean_evidence, "speculative")}
    assert set(clean) == set(DRAFT_LENGTHS)
    for draft_length, check in clean.items():
        m = check["measurements"]
        assert check["status"] == "passed", check["reason"]
        assert m["acceptance_ratio"] == 1.0  # the same drafter on the same greedy outputs
        # stock is the same in both runs: the faulty run's drop is the candidate's own
        assert m["stock_acceptance_length"] == faulty[draft_length]["measurements"]["stock_acceptance_length"]


def test_first_row_sampling_fails_the_mixed_batch_probe_and_the_clean_sampler_passes(tmp_path):
    (code, evidence, text), (clean_code, clean_evidence, clean_text) = side_by_side(
        tmp_path, "first_row_sampling", mixed_batches_only, "features"
    )

    assert code == 1 and evidence["verdict"]["status"] == "FAIL", text
    (faulty,) = checks(evidence, "features")
    assert faulty["name"] == "mixed_batches"
    assert faulty["status"] == "failed" and faulty["reason_code"] == "mismatch", faulty["reason"]
    # a sampled row off its own distribution: a greedy row's setting (greedy first) or another
    # temperature (sampled first) leaked into it
    assert faulty["reason"].startswith("in a mixed batch ("), faulty["reason"]
    assert "does not follow its own distribution" in faulty["reason"]
    assert "another row's sampling parameters leak into it" in faulty["reason"]

    assert clean_code == 0 and clean_evidence["verdict"]["status"] == "PASS", clean_text
    (clean,) = checks(clean_evidence, "features")
    assert clean["name"] == "mixed_batches" and clean["status"] == "passed", clean["reason"]
    assert clean["measurements"]["details"]["power_if_greedy_leaks"] >= 0.8  # a pass that could have failed
