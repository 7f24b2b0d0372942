"""The gate against a real vLLM pair: examples/vllm-mini-k3/fasttrack.yaml served by vLLM's CPU
build (one server per side, shared by the checks of the run), and the plugin's planted faults
(``VLLM_MINI_K3_FAULT``, read by the plugin in every process it runs in) each failing the check
that must catch it.

Cost on the 2-core host: every run starts its own pair (27-29 s quiet), so each case is one
``fasttrack check`` narrowed with ``--only`` to what it needs (with ``switch,features`` in the
first case the module took 314 s at load 10, 196 s of it the features). The fault is set in the gate's
environment, which both servers and the kernel tests inherit: the baseline runs it too, which is
the point of ``leak`` (the stock side runs the latency path). ``fallback`` (the counter counts,
the path never ran) is caught by the kernel census both servers' torch profilers take at each
benchmarked concurrency (``--only benchmarks``: the timed pairs, then the census).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "examples" / "vllm-mini-k3" / "fasttrack.yaml"
CHECKPOINT = REPO / "examples" / "vllm-mini-k3" / "checkpoint" / "config.json"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        find_spec("vllm") is None, reason="vLLM is not installed (bash scripts/install.sh installs its CPU build)"
    ),
    pytest.mark.skipif(
        not CHECKPOINT.exists(), reason="no vllm-mini-k3 checkpoint (bash scripts/install.sh writes it)"
    ),
]


def check(tmp_path: Path, only: str, fault: str | None = None) -> tuple[int, dict]:
    """``fasttrack check`` of the example narrowed to ``only``; (exit code, evidence)."""
    env = {k: v for k, v in os.environ.items() if k != "VLLM_MINI_K3_FAULT"}
    if fault:
        env["VLLM_MINI_K3_FAULT"] = fault
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "fasttrack", "check", str(MANIFEST), "--only", only, "--out", str(out), "--no-reports"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    evidence = json.loads((out / "evidence.json").read_text())
    return done.returncode, evidence


def outcomes(evidence: dict, kind: str) -> dict[str, dict]:
    return {o["id"]: o for o in evidence["checks"] if o["kind"] == kind and o["required"]}


def test_the_switch_proof_passes_on_the_real_pair_sharing_one_server_per_side(tmp_path):
    # The feature probes pass too (`--only switch,features`: 196 s at load 10, measured), but CI's
    # 20 minutes have room for the proof of path only: a pair's start and a few requests.
    code, evidence = check(tmp_path, "switch")
    ran = outcomes(evidence, "switch")
    assert {o["status"] for o in ran.values()} == {"passed"}, {k: o.get("reason") for k, o in ran.items()}
    assert code == 0 and evidence["verdict"]["status"] == "PASS"
    # one server per side for the whole run, both reporting vLLM's build
    started = sorted(p.name for p in (tmp_path / "out" / "servers").iterdir())
    assert started == ["01-baseline", "02-candidate"]
    assert evidence["engine_build"]["baseline"]["version"] == evidence["engine_build"]["candidate"]["version"]
    switch = next(iter(outcomes(evidence, "switch").values()))
    counts = switch["measurements"]["candidate_path_counts"]
    assert counts.get("fused_norms", 0) > 0 and not switch["measurements"]["default_path_counts"]


def test_the_switch_leaking_into_stock_fails_the_switch_check(tmp_path):
    code, evidence = check(tmp_path, "switch", fault="leak")
    [switch] = outcomes(evidence, "switch").values()
    assert switch["status"] == "failed" and switch["reason_code"] == "switch_default_on", switch.get("reason")
    assert code == 1 and evidence["verdict"]["status"] == "FAIL"


def test_one_module_wrong_at_batch_3_fails_exactly_its_kernel_tests(tmp_path):
    code, evidence = check(tmp_path, "kernels", fault="moe_batch3")
    failed = [o for o in outcomes(evidence, "kernels").values() if o["status"] == "failed"]
    assert failed and code == 1
    text = json.dumps([o.get("measurements") for o in failed]) + " ".join(o.get("reason") or "" for o in failed)
    assert "small_batch_moe" in text and "batch=3" in text.replace(" ", "")


def test_a_silent_fallback_with_a_counter_that_still_counts_fails_the_census_proof(tmp_path):
    # `fallback`: the plugin keeps vLLM's stock modules but its counter still counts every step.
    # The counter proof cannot see it; both servers' torch profilers can: the candidate's decode
    # step has stock's operators. Timing it would time stock against stock: it is not timed.
    code, evidence = check(tmp_path, "benchmarks", fault="fallback")
    timed = outcomes(evidence, "benchmarks").values()
    assert {(o["status"], o["reason_code"]) for o in timed} == {("not_run", "path_not_exercised")}
    census = {k: o for k, o in outcomes(evidence, "switch").items() if k.endswith("#census")}
    assert len(census) == 2, sorted(outcomes(evidence, "switch"))  # one per benchmarked concurrency
    for outcome in census.values():
        assert outcome["status"] == "failed" and outcome["reason_code"] == "path_not_exercised", outcome.get("reason")
        assert "the counter disagrees with the census" in outcome["reason"]
        m = outcome["measurements"]
        assert m["kernels_per_layer"]["candidate"] == m["kernels_per_layer"]["baseline"]
        assert m["path_counter"]["fused_norms"] > 0
    assert code == 1 and evidence["verdict"]["status"] == "FAIL"


@pytest.mark.exclusive  # the timed pairs assume each side's core is its own (README: -n 2)
def test_a_slowdown_at_one_concurrency_fails_the_timed_pairs_there_only(tmp_path):
    # `slow_at_8`: decode steps of 4+ sequences take twice as long in the model's forward. The
    # timed pairs decide: concurrency 8 shown slower than 0.95 x stock, concurrency 1 within it.
    code, evidence = check(tmp_path, "benchmarks", fault="slow_at_8")
    timed = {o["measurements"]["max_concurrency"]: o for o in outcomes(evidence, "benchmarks").values()}
    assert timed[8]["status"] == "failed" and timed[8]["reason_code"] == "regression", timed[8].get("reason")
    assert "slower than stock by more than the declared 5%" in timed[8]["reason"]
    assert timed[8]["measurements"]["ratio_ci"][1] < 0.95
    assert timed[1]["status"] == "passed", timed[1].get("reason")
    assert code == 1 and evidence["verdict"]["status"] == "FAIL"
    # the fault only waits: at both concurrencies both servers' profilers show the latency path
    # (measured 681 and 666 top-level operators per decode step against stock's 920)
    for concurrency, outcome in timed.items():
        census = outcome["measurements"]["kernel_census"]
        base, cand = census["baseline"], census["candidate"]
        assert base["steps"] >= 3 and cand["steps"] >= 3 and base["batch"] == concurrency
        assert cand["kernels_per_step"] < 0.8 * base["kernels_per_step"]
        assert "_C::rms_norm" in cand["kernel_names"] and "_C::rms_norm" not in base["kernel_names"]
        assert "aten::rsqrt" in base["kernel_names"]
    proofs = {k: o for k, o in outcomes(evidence, "switch").items() if k.endswith("#census")}
    assert len(proofs) == 2 and {o["status"] for o in proofs.values()} == {"passed"}
    for proof in proofs.values():
        assert proof["measurements"]["path_counter"]["fused_norms"] > 0
        assert "aten::mean" in [d["name"] for d in proof["measurements"]["census_differences"]]


def test_the_install_fills_vllms_model_info_cache_for_both_paths(tmp_path):
    # scripts/install.sh runs vllm_mini_k3.warm so that no server's first start spends ~16 s
    # inspecting its model class in a subprocess: one file per class, in vLLM's own format.
    env = {**os.environ, "VLLM_CACHE_ROOT": str(tmp_path)}
    env.pop("VLLM_MINI_K3_LATENCY", None)
    done = subprocess.run(
        [sys.executable, "-m", "vllm_mini_k3.warm"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = {p.name: json.loads(p.read_text()) for p in (tmp_path / "modelinfos").iterdir()}
    assert sorted(info["modelinfo"]["architecture"] for info in found.values()) == [
        "DeepseekV3ForCausalLM",
        "MiniK3LatencyForCausalLM",
    ]
    assert all(info["modelinfo"]["is_text_generation_model"] and info["hash"] for info in found.values())
