"""Kernel results -> per-scope-point outcomes: failures, crashes, coverage."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from fasttrack.evidence import Status
from fasttrack.kinds.context import RunContext
from fasttrack.kinds.kernels.run import outcome_at
from fasttrack.kinds.pytest_session import PytestSession
from fasttrack.manifest import ScopePoint


def ctx(tmp_path: Path) -> RunContext:
    return RunContext(manifest=None, environment=None, evidence_dir=tmp_path, artifact_dir=tmp_path / "a", timeout_s=10)


def inst(**dims):
    point = ScopePoint.of({"accelerator": "cpu", "device_count": 1, **dims})
    return SimpleNamespace(id=f"kernels/k@{point.id}", kind="kernels", name="k", scope_point=point, required=True)


def result(outcome, nodeid="t.py::test_a", message="", **point):
    return {
        "nodeid": nodeid,
        "outcome": outcome,
        "scope_point": point or None,
        "dims": sorted(point) or None,
        "message": message,
    }


def test_point_passes_only_when_every_covered_dimension_was_exercised(tmp_path):
    session = PytestSession([result("passed", batch=1), result("passed", "t.py::test_b", dtype="fp32")], 0, collected=2)
    both = outcome_at(inst(batch=1, dtype="fp32"), ctx(tmp_path), session, ("batch", "dtype"))
    assert both.status is Status.PASSED
    gap = outcome_at(inst(batch=1, dtype="bf16"), ctx(tmp_path), session, ("batch", "dtype"))
    assert (gap.status, gap.reason_code) == (Status.NOT_RUN, "uncovered")
    assert gap.reason == "no passing kernel test exercised dtype at accelerator=cpu,batch=1,device_count=1,dtype=bf16"


def test_failure_at_one_point_and_unmarked_failures_everywhere(tmp_path):
    session = PytestSession([result("passed", batch=1), result("failed", message="boom", batch=17)], 1, collected=2)
    assert outcome_at(inst(batch=1), ctx(tmp_path), session, ("batch",)).status is Status.PASSED
    bad = outcome_at(inst(batch=17), ctx(tmp_path), session, ("batch",))
    assert bad.status is Status.FAILED and "t.py::test_a: boom" in bad.reason
    session.results.append(result("error", "t.py::test_setup", message="fixture broke"))
    assert outcome_at(inst(batch=1), ctx(tmp_path), session, ("batch",)).status is Status.FAILED


def test_crash_and_timeout_error_the_points_not_already_failed(tmp_path):
    crashed = PytestSession([result("passed", batch=1)], -11, signal=11, running="t.py::test_a[batch=17]")
    out = outcome_at(inst(batch=1), ctx(tmp_path), crashed, ("batch",))
    assert (out.status, out.reason_code) == (Status.ERRORED, "crashed")
    assert out.reason == "pytest died from SIGSEGV while running t.py::test_a[batch=17]"
    hung = PytestSession([], None, timed_out=True, running="t.py::test_a[batch=1]", timeout_s=5)
    out = outcome_at(inst(batch=1), ctx(tmp_path), hung, ("batch",))
    assert (out.status, out.reason_code) == (Status.ERRORED, "timeout") and "timeout of 5s" in out.reason


def test_no_tests_collected_is_uncovered(tmp_path):
    out = outcome_at(inst(batch=1), ctx(tmp_path), PytestSession([], 5, collected=0), ("batch",))
    assert (out.status, out.reason_code) == (Status.NOT_RUN, "uncovered") and "collected no kernel tests" in out.reason


def test_results_without_the_plugin_credit_nothing(tmp_path):
    out = outcome_at(inst(batch=1), ctx(tmp_path), PytestSession([], 0, collected=None), ("batch",))
    assert (out.status, out.reason_code) == (Status.ERRORED, "error") and "plugin did not run" in out.reason


def test_the_between_points_instance_names_the_failing_sizes_and_what_ran(tmp_path):
    from fasttrack.kinds.kernels.run import between_outcome
    from fasttrack.manifest import load_manifest

    manifest = load_manifest(Path(__file__).resolve().parents[2] / "fixtures" / "faults" / "base" / "fasttrack.yaml")
    context = RunContext(manifest, None, tmp_path, tmp_path / "a", 10)
    between = [b for b in range(1, 33) if b not in (1, 17, 32)]
    records = [{**result("passed", batch=b), "off_grid": True} for b in between]
    point = ScopePoint.of({"accelerator": "cpu", "device_count": 1})
    instance = SimpleNamespace(
        id=f"kernels/k:between@{point.id}", kind="kernels", name="k:between", scope_point=point, required=True
    )
    clean = between_outcome(instance, context, PytestSession(records, 0, collected=len(records)))
    assert clean.status is Status.PASSED
    sizes = clean.measurements["batch_sizes"]
    assert sizes["ran"] == between and sizes["policy"] == "every size" and sizes["declared"] == [1, 17, 32]
    records[5] = {**result("failed", message="off by one", batch=7), "off_grid": True}
    bad = between_outcome(instance, context, PytestSession(records, 1, collected=len(records)))
    assert bad.status is Status.FAILED and "batch size(s) 7 between the declared points" in bad.reason
    assert bad.measurements["batch_sizes"]["failed"] == [7]
    missing = between_outcome(instance, context, PytestSession(records[:3], 0, collected=3))
    assert missing.status is Status.NOT_RUN and missing.reason_code == "uncovered"


def test_required_tests_that_skipped_keep_the_point_from_passing(tmp_path):
    """A suite whose parity tests all skipped while another test passed does not pass: each
    required pattern needs a passing test at the point (issue #36)."""
    parity_skipped = [
        result("skipped", "k.py::test_parity[b1]", batch=1),
        result("skipped", "k.py::test_parity[b8]", batch=1),
        result("passed", "k.py::test_shapes", batch=1),
    ]
    session = PytestSession(parity_skipped, 0, collected=3)
    out = outcome_at(inst(batch=1), ctx(tmp_path), session, ("batch",), ("*test_parity*",))
    assert (out.status, out.reason_code) == (Status.NOT_RUN, "uncovered")
    assert "*test_parity*" in out.reason and "did not pass" in out.reason
    assert out.measurements["required_tests"] == [{"pattern": "*test_parity*", "matched": 2, "passed": 0, "skipped": 2}]
    # without the declaration the same results pass (what the issue found), with a passing parity test too
    assert outcome_at(inst(batch=1), ctx(tmp_path), session, ("batch",)).status is Status.PASSED
    session.results.append(result("passed", "k.py::test_parity[b1]", batch=1))
    assert outcome_at(inst(batch=1), ctx(tmp_path), session, ("batch",), ("*test_parity*",)).status is Status.PASSED


def test_verify_refuses_a_pass_whose_required_tests_did_not_pass():
    from fasttrack.kinds.kernels.rule import check
    from fasttrack.kinds.reading import Subject

    suite = SimpleNamespace(id="k", required_tests=("*test_parity*",))
    subject = Subject(SimpleNamespace(kernel_tests=(suite,)), {})  # type: ignore[arg-type]
    tests = [{"nodeid": "k.py::test_shapes", "outcome": "passed"}]
    outcome = {
        "name": "k",
        "status": "passed",
        "measurements": {
            "tests": tests,
            "tests_total": 1,
            "passed": 1,
            "failed": 0,
            "errors": 0,
            "skipped": 0,
            "required_tests": [{"pattern": "*test_parity*", "matched": 0, "passed": 0, "skipped": 0}],
        },
    }
    assert any("required test" in p for p in check(outcome, subject))
    outcome["measurements"]["required_tests"][0].update(matched=1, passed=1)
    assert check(outcome, subject) == []


def test_a_manifest_declares_required_tests():
    from fasttrack.manifest import load_manifest

    path = Path(__file__).resolve().parents[2] / "fixtures" / "manifests" / "valid" / "required-tests.yaml"
    (suite,) = load_manifest(path).kernel_tests
    assert suite.required_tests == ("*test_topk_parity*", "*test_radix4_vs_reference*")
