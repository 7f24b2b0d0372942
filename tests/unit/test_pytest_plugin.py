"""The fasttrack pytest plugin, driven through pytester."""

from __future__ import annotations

import json
from pathlib import Path

import numpy  # noqa: F401  (imported here so pytester's in-process runs do not re-import it)
import pytest

import fasttrack.kernel_testing
import fasttrack.manifest  # noqa: F401

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "tests" / "fixtures" / "faults" / "base" / "fasttrack.yaml"

TESTS = """
import pytest
from fasttrack.kernel_testing import assert_close_recorded, record_result

@pytest.mark.fasttrack_scope("batch")
def test_sum(scope_point, batch, fasttrack_record):
    assert scope_point == {"batch": batch}
    assert_close_recorded([1.0 + 1e-7] * batch, [1.0] * batch, dtype="fp32")
    fasttrack_record.record_tolerance(atol=1e-3, rtol=0.0)
    record_result(batch)
    assert batch != 17, "wrong at 17"

def test_plain():
    pass
"""


def results(path: Path) -> list[dict]:
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["event"] == "result"]


def test_without_manifest_uses_default_points_and_runs_in_plain_pytest(pytester):
    pytester.makepyfile(TESTS)
    run = pytester.runpytest("-p", "no:cacheprovider")
    run.assert_outcomes(passed=2, failed=1)  # default batches 1 and 17, plus test_plain
    run.stdout.fnmatch_lines(["*AssertionError: wrong at 17*", "*FAILED*test_sum[[]batch=17[]]*"])


def run_at_manifest_points(pytester, out):
    """pytest with the plugin at the manifest's points (none between them), results to ``out``."""
    return pytester.runpytest(
        "-p",
        "no:cacheprovider",
        f"--fasttrack-manifest={MANIFEST}",
        f"--fasttrack-results={out}",
        "--fasttrack-between=none",
    )


def test_manifest_points_and_records(pytester, tmp_path):
    pytester.makepyfile(TESTS)
    out = tmp_path / "r.jsonl"
    run = run_at_manifest_points(pytester, out)
    run.assert_outcomes(passed=3, failed=1)  # manifest batches 1, 17, 32
    recs = {r["nodeid"].split("::")[-1]: r for r in results(out)}
    assert set(recs) == {"test_sum[batch=1]", "test_sum[batch=17]", "test_sum[batch=32]", "test_plain"}
    ok, bad = recs["test_sum[batch=32]"], recs["test_sum[batch=17]"]
    assert ok["outcome"] == "passed" and ok["scope_point"] == {"batch": 32} and ok["dims"] == ["batch"]
    assert ok["tolerance"] == {"atol": 1e-3, "rtol": 1.3e-6}  # the loosest tolerance used is recorded
    assert ok["worst_error"]["abs"] == pytest.approx(1e-7, rel=1e-3)
    assert bad["outcome"] == "failed" and "wrong at 17" in bad["message"]
    assert recs["test_plain"]["scope_point"] is None
    assert len(ok["result_digests"]) == 1


def test_where_filter_and_repeats_with_delays(pytester, tmp_path):
    pytester.makepyfile("""
import os, pytest
@pytest.mark.fasttrack_scope("batch")
def test_delay(batch):
    print(os.environ.get("MY_DELAY"))
""")
    out = tmp_path / "r.jsonl"
    run = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        f"--fasttrack-manifest={MANIFEST}",
        f"--fasttrack-results={out}",
        "--fasttrack-where=accelerator=cpu,batch=17",
        "--fasttrack-repeat=4",
        "--fasttrack-delay-env=MY_DELAY",
        "--fasttrack-delays=0,50",
    )
    run.assert_outcomes(passed=4)
    recs = results(out)
    assert sorted(r["repeat"] for r in recs) == [0, 1, 2, 3]
    assert [r["test"].split("::")[-1] for r in recs] == ["test_delay[batch=17]"] * 4
    assert sorted(r["delay_us"] for r in recs) == [0, 0, 50, 50]  # every delay is used


def test_assert_close_recorded_tolerances():
    from fasttrack.kernel_testing import assert_close_recorded, default_tolerance

    assert default_tolerance("bfloat16") == default_tolerance("bf16") == (1e-5, 1.6e-2)
    assert_close_recorded([1.0, 2.0], [1.0, 2.01], dtype="bf16")
    with pytest.raises(AssertionError, match="1 of 2 elements differ beyond atol=1e-05, rtol=1.3e-06"):
        assert_close_recorded([1.0, 2.0], [1.0, 2.01], dtype="fp32")
    with pytest.raises(AssertionError):
        assert_close_recorded([float("nan")], [1.0], dtype="fp32")


def test_bad_manifest_is_a_usage_error(pytester, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("fasttrack: 2\n")
    pytester.makepyfile("import pytest\n@pytest.mark.fasttrack_scope('batch')\ndef test_x(batch):\n    pass\n")
    run = pytester.runpytest("-p", "no:cacheprovider", f"--fasttrack-manifest={bad}")
    assert run.ret != 0
    run.stderr.fnmatch_lines(["*--fasttrack-manifest*manifest is invalid*"])


def test_a_dimension_the_test_parametrises_itself_keeps_its_values(pytester, tmp_path):
    pytester.makepyfile("""
import pytest
@pytest.mark.fasttrack_scope("batch", "dtype")
@pytest.mark.parametrize("dtype", ["fp32"])
def test_own(scope_point, batch, dtype):
    assert scope_point == {"batch": batch, "dtype": dtype}
""")
    out = tmp_path / "r.jsonl"
    run = pytester.runpytest("-p", "no:cacheprovider", f"--fasttrack-manifest={MANIFEST}", f"--fasttrack-results={out}")
    run.assert_outcomes(passed=32)  # the declared 1, 17, 32 and the 29 sizes between them
    assert sorted(r["scope_point"]["batch"] for r in results(out)) == list(range(1, 33))
    assert {r["scope_point"]["dtype"] for r in results(out)} == {"fp32"}
    plain = pytester.runpytest("-p", "no:cacheprovider")
    plain.assert_outcomes(passed=2)  # default batches 1 and 17 x the test's own dtype


def test_every_batch_size_between_the_declared_points_runs_once(pytester, tmp_path):
    pytester.makepyfile("""
import pytest
@pytest.mark.fasttrack_scope("batch", "dtype")
def test_kernel(scope_point):
    b = scope_point["batch"]
    assert not (8 < b < 17 and b % 2), f"wrong at {b}"
""")
    manifest = tmp_path / "fasttrack.yaml"
    manifest.write_text(
        MANIFEST.read_text().replace("batch: {min: 1, max: 32", "dtypes: [fp32, bf16]\n  batch: {min: 1, max: 32")
    )
    out = tmp_path / "r.jsonl"
    run = pytester.runpytest("-p", "no:cacheprovider", f"--fasttrack-manifest={manifest}", f"--fasttrack-results={out}")
    recs = results(out)
    declared = [r for r in recs if not r["off_grid"]]
    between = [r for r in recs if r["off_grid"]]
    assert sorted({r["scope_point"]["batch"] for r in declared}) == [1, 17, 32] and len(declared) == 6
    assert sorted(r["scope_point"]["batch"] for r in between) == [b for b in range(1, 33) if b not in (1, 17, 32)]
    assert {r["scope_point"]["dtype"] for r in between} == {"fp32"}  # the other dimension at its first value
    assert all("[between:" in r["nodeid"] for r in between)
    failed = sorted(r["scope_point"]["batch"] for r in recs if r["outcome"] == "failed")
    assert failed == [9, 11, 13, 15]  # caught between the declared points, which all pass
    run.assert_outcomes(passed=31, failed=4)


def test_a_wide_range_samples_sizes_with_the_given_seed():
    from fasttrack.pytest_plugin import between_batches

    every, policy = between_batches(1, 256, [1, 64, 256], "abc")
    assert len(every) == 253 and policy == "every size"
    drawn, policy = between_batches(1, 4096, [1, 64, 4096], "abc")
    assert len(drawn) == 16 and "seed abc" in policy and not {1, 64, 4096} & set(drawn)
    assert between_batches(1, 4096, [1, 64, 4096], "abc")[0] == drawn != between_batches(1, 4096, [1, 64, 4096], "d")[0]


def test_fasttrack_bench_records_micro_benchmarks_per_test_and_shape(pytester, tmp_path):
    pytester.makepyfile("""
import pytest

@pytest.mark.fasttrack_scope("batch")
def test_op(batch, fasttrack_bench):
    fast = lambda: sum(range(10 * batch))
    slow = lambda: sum(range(40 * batch))
    timed = fasttrack_bench(fast, slow, name="op", shape=(batch, 4), pairs=5, warmup=1)
    assert timed.speedup > 0 and timed.candidate_us > 0

def test_untimed():
    pass
""")
    out = tmp_path / "r.jsonl"
    run = run_at_manifest_points(pytester, out)
    run.assert_outcomes(passed=4)
    recs = {r["nodeid"].split("::")[-1]: r for r in results(out)}
    (timed,) = recs["test_op[batch=17]"]["micro_benchmarks"]
    assert timed["name"] == "op" and timed["shape"] == "17x4" and timed["timer"] == "perf_counter"
    assert len(timed["candidate_s"]) == len(timed["reference_s"]) == 5 and timed["calls"] >= 1
    assert "micro_benchmarks" not in recs["test_untimed"]
