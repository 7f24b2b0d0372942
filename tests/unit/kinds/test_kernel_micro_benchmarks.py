"""Kernel micro-benchmarks: interleaved timing (`fasttrack.kernel_bench`), their summary in a
kernels outcome and the suite's claims about them (`fasttrack.kinds.kernels.micro`)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fasttrack import kernel_testing
from fasttrack.evidence import Status
from fasttrack.kernel_bench import bench, shape_label, time_pairs
from fasttrack.kinds.context import RunContext
from fasttrack.kinds.kernels.measurements import KernelMeasurements
from fasttrack.kinds.kernels.micro import claim_outcomes, judge, summarise
from fasttrack.kinds.kernels.run import outcome_at
from fasttrack.kinds.pytest_session import PytestSession
from fasttrack.manifest import ScopePoint


def test_pairs_are_interleaved_and_counterbalanced_after_warm_up():
    calls: list[str] = []
    timed = time_pairs(lambda: calls.append("c"), lambda: calls.append("r"), name="op", pairs=4, warmup=2, calls=1)
    assert calls[:4] == ["c", "r", "c", "r"]  # warm-up: each op twice
    assert calls[4:] == ["c", "r", "r", "c", "c", "r", "r", "c"]  # AB BA AB BA
    assert len(timed.candidate_s) == len(timed.reference_s) == 4
    assert timed.device == "cpu" and timed.timer == "perf_counter" and timed.calls == 1


def test_calls_per_block_are_calibrated_to_the_minimum_block_time():
    timed = time_pairs(lambda: None, lambda: None, name="noop", pairs=2, warmup=0, min_block_s=1e-4)
    assert timed.calls > 1  # a no-op takes far less than 0.1 ms
    assert len(timed.candidate_s) == len(timed.reference_s) == 2


def test_shape_labels():
    assert shape_label((8, 4096)) == "8x4096"
    assert shape_label({"batch": 8, "hidden": 64}) == "batch=8,hidden=64"
    assert shape_label("tokens=256") == "tokens=256" and shape_label(None) == ""


def test_bench_records_on_the_running_tests_recorder_and_nothing_outside_one():
    recorder = kernel_testing.Recorder()
    kernel_testing.set_current_recorder(recorder)
    try:
        bench(lambda: None, lambda: None, name="noop", shape=(1, 2), pairs=3, warmup=0, calls=1)
    finally:
        kernel_testing.set_current_recorder(None)
    (recorded,) = recorder.micro_benchmarks
    assert recorded["name"] == "noop" and recorded["shape"] == "1x2" and len(recorded["candidate_s"]) == 3
    assert bench(lambda: None, lambda: None, name="free", pairs=1, warmup=0, calls=1).name == "free"


def timed(cand_us, ref_us, name="rms_norm", shape="8x256"):
    return {
        "name": name,
        "shape": shape,
        "device": "cpu",
        "timer": "perf_counter",
        "calls": 10,
        "candidate_s": [c * 1e-6 for c in cand_us],
        "reference_s": [r * 1e-6 for r in ref_us],
    }


FAST = timed([10.0 + 0.1 * i for i in range(21)], [20.0 + 0.1 * i for i in range(21)])  # 2x, 10 us saved


def test_summary_medians_ratio_and_sign_test_bounds():
    s = summarise({"nodeid": "t.py::test_a", "outcome": "passed"}, FAST)
    assert s["pairs"] == 21 and s["candidate_us"] == pytest.approx(11.0) and s["reference_us"] == pytest.approx(21.0)
    assert s["speedup"] == pytest.approx(21.0 / 11.0, rel=1e-6) and s["saved_us"] == pytest.approx(10.0)
    lo, hi = s["speedup_ci"]
    assert lo < s["speedup"] < hi and s["saved_us_ci"] == [pytest.approx(10.0), pytest.approx(10.0)]


def test_claims_are_judged_on_the_bounds_and_fail_closed():
    bench_ = summarise({"nodeid": "t", "outcome": "passed"}, FAST)
    assert judge({"benchmark": "rms_norm", "speedup": 1.5}, [bench_])[0] == "reproduced"
    assert judge({"benchmark": "rms_norm", "speedup": 2.5}, [bench_])[0] == "not_reproduced"
    assert judge({"benchmark": "rms_norm", "difference": {"value": 9.5, "unit": "us"}}, [bench_])[0] == "reproduced"
    assert judge({"benchmark": "rms_*", "difference": {"value": 0.02, "unit": "ms"}}, [bench_])[0] == "not_reproduced"
    # an interval straddling the claim: undecided, never reproduced
    noisy = summarise({"nodeid": "t", "outcome": "passed"}, timed([10.0] * 11 + [30.0] * 10, [20.0] * 21))
    assert judge({"benchmark": "rms_norm", "speedup": 1.5}, [noisy])[0] is None
    # no measurement, another shape, or a failing test's timing: not measurable
    failed = summarise({"nodeid": "t", "outcome": "failed"}, FAST)
    assert judge({"benchmark": "rms_norm", "speedup": 1.5}, [failed])[0] == "not_measurable"
    assert judge({"benchmark": "rms_norm", "speedup": 1.5, "shapes": ["1x*"]}, [bench_])[0] == "not_measurable"
    assert judge({"benchmark": "other", "speedup": 1.5}, [bench_])[0] == "not_measurable"


def ctx(tmp_path: Path) -> RunContext:
    return RunContext(manifest=None, environment=None, evidence_dir=tmp_path, artifact_dir=tmp_path / "a", timeout_s=10)


def inst(**dims):
    point = ScopePoint.of({"accelerator": "cpu", "device_count": 1, **dims})
    return SimpleNamespace(id=f"kernels/k@{point.id}", kind="kernels", name="k", scope_point=point, required=True)


def test_a_kernels_outcome_carries_its_micro_benchmarks_and_the_claims_outcomes(tmp_path):
    record = {
        "nodeid": "t.py::test_norm[batch=8]",
        "outcome": "passed",
        "scope_point": {"batch": 8},
        "dims": ["batch"],
        "micro_benchmarks": [FAST],
    }
    out = outcome_at(inst(batch=8), ctx(tmp_path), PytestSession([record], 0, collected=1), ("batch",))
    assert out.status is Status.PASSED
    (micro,) = KernelMeasurements.read(out.measurements).micro_benchmarks or ()
    assert micro.name == "rms_norm" and micro.speedup == pytest.approx(21 / 11) and micro.test_outcome == "passed"
    suite = SimpleNamespace(
        id="k",
        raw={
            "claims": [
                {"id": "fast", "statement": "2x", "benchmark": "rms_norm", "speedup": 1.8},
                {
                    "id": "slow",
                    "statement": "20 us",
                    "benchmark": "rms_norm",
                    "difference": {"value": 20, "unit": "us"},
                },
                {"id": "absent", "statement": "x", "benchmark": "router", "speedup": 1.1},
                {
                    "id": "elsewhere",
                    "statement": "x",
                    "benchmark": "rms_norm",
                    "speedup": 1.1,
                    "points": {"batch": [1]},
                },
            ]
        },
    )
    claims = {
        c.name: c for c in claim_outcomes(inst(batch=8), ctx(tmp_path), suite, out.measurements["micro_benchmarks"])
    }
    assert set(claims) == {"fast", "slow", "absent"}  # "elsewhere" is judged at batch 1 only
    assert (
        claims["fast"].status is Status.PASSED
        and claims["fast"].id == "claims/fast@accelerator=cpu,batch=8,device_count=1"
    )
    assert (claims["slow"].status, claims["slow"].reason_code) == (Status.FAILED, "regression")
    assert (claims["absent"].status, claims["absent"].reason_code) == (Status.NOT_RUN, "uncovered")
    assert all(c.kind == "claims" and not c.required for c in claims.values())
    assert claims["fast"].measurements["status"] == "reproduced"


def test_verify_re_derives_a_micro_benchmark_claims_status_from_its_recorded_bounds(tmp_path):
    from dataclasses import replace

    from fasttrack.kinds.claims.rule import check
    from fasttrack.kinds.reading import Subject

    claim = {"id": "fast", "statement": "2x", "benchmark": "rms_norm", "speedup": 1.8}
    suite = SimpleNamespace(id="k", raw={"claims": [claim]})
    subject = Subject(SimpleNamespace(kernel_tests=(suite,)), {})  # type: ignore[arg-type]
    bench_ = summarise({"nodeid": "t", "outcome": "passed"}, FAST)
    (passed,) = claim_outcomes(inst(batch=8), ctx(tmp_path), suite, [bench_])
    as_json = passed.to_dict()
    assert check(as_json, subject) == []
    forged = replace(passed, measurements={**passed.measurements, "measured": {"benchmarks": []}}).to_dict()
    assert check(forged, subject) == ["passed, but its recorded micro-benchmark bounds give not_measurable"]
    flipped = {**as_json, "status": "failed"}
    assert check(flipped, subject) == ["failed, but its recorded micro-benchmark bounds give reproduced"]
