"""`fasttrack check --only kernels` on the toy project with a micro-benchmark in its kernel tests
(#36 item 5): the kernels outcomes carry the timings, the suite's claims come out reproduced,
not reproduced or not_run (no measurement), the evidence verifies, and the reports show the
micro-benchmarks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from support.projects import commit_all

BENCH_TEST = """
import pytest


def one_pass(n):
    return sum(range(n))


@pytest.mark.fasttrack_scope("batch")
def test_sum_is_timed(batch, fasttrack_bench):
    assert one_pass(50) == sum(range(50))
    fasttrack_bench(lambda: one_pass(50), lambda: one_pass(2000), name="toy_sum", shape=(batch, 50), pairs=9)
"""

CLAIMS = [
    {
        "id": "toy-sum-2x",
        "statement": "2x faster per call",
        "benchmark": "toy_sum",
        "speedup": 2,
        "points": {"batch": [1]},
    },
    {
        "id": "toy-sum-hides-1ms",
        "statement": "1 ms per call hidden",
        "benchmark": "toy_sum",
        "difference": {"value": 1, "unit": "ms"},
        "points": {"batch": [17]},
    },
    {"id": "toy-router", "statement": "router 1.1x", "benchmark": "router", "speedup": 1.1, "points": {"batch": [32]}},
]


def fasttrack(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fasttrack", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def test_micro_benchmarks_and_their_claims_through_a_check(make_project, tmp_path):
    project = make_project()
    (project / "tests" / "kernels" / "test_bench.py").write_text(BENCH_TEST)
    manifest = yaml.safe_load((project / "fasttrack.yaml").read_text())
    manifest["kernel_tests"][0]["claims"] = CLAIMS
    (project / "fasttrack.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    commit_all(project)
    out = tmp_path / "out"
    done = fasttrack(project, "check", "fasttrack.yaml", "--only", "kernels", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr  # claims never decide the verdict
    evidence = json.loads((out / "evidence.json").read_text())
    kernels = {c["scope_point_id"]: c for c in evidence["checks"] if c["kind"] == "kernels"}
    (timed,) = kernels["accelerator=cpu,batch=1,device_count=1"]["measurements"]["micro_benchmarks"]
    assert timed["name"] == "toy_sum" and timed["shape"] == "1x50" and timed["pairs"] == 9
    assert timed["speedup"] > 2 and timed["speedup_ci"][0] > 2 and timed["candidate_us"] < timed["reference_us"]
    claims = {c["name"]: c for c in evidence["checks"] if c["kind"] == "claims"}
    assert set(claims) == {"toy-sum-2x", "toy-sum-hides-1ms", "toy-router"}  # each at its one point
    assert claims["toy-sum-2x"]["status"] == "passed" and claims["toy-sum-2x"]["measurements"]["status"] == "reproduced"
    assert (claims["toy-sum-hides-1ms"]["status"], claims["toy-sum-hides-1ms"]["reason_code"]) == (
        "failed",
        "regression",
    )
    assert (claims["toy-router"]["status"], claims["toy-router"]["reason_code"]) == ("not_run", "uncovered")
    assert not any(c["required"] for c in claims.values())
    verified = fasttrack(project, "verify", str(out), "--allow-partial")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    summary = (out / "summary.md").read_text()
    assert "Kernel micro-benchmarks" in summary and "toy_sum 1x50" in summary
    assert "Kernel micro-benchmarks" in (out / "report.html").read_text()
