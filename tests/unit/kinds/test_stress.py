"""Stress audit judgement: identical results across repeats, or a precise mismatch."""

from __future__ import annotations

from types import SimpleNamespace

from fasttrack.evidence import Status
from fasttrack.kinds.context import RunContext
from fasttrack.kinds.pytest_session import PytestSession
from fasttrack.kinds.stress.run import judge

AUDIT = SimpleNamespace(id="s", repeats=3, delay_env="D", delays_us=(0, 100), test="t.py::test_s")
INSTANCE = SimpleNamespace(id="stress/s", kind="stress", name="s", scope_point=None, required=True)


def runs(*digests, outcome="passed"):
    return [
        {
            "nodeid": f"t.py::test_s[r{i}]",
            "test": "t.py::test_s",
            "outcome": outcome,
            "repeat": i,
            "result_digests": [d] if d else [],
        }
        for i, d in enumerate(digests)
    ]


def judged(tmp_path, results, rc=0):
    ctx = RunContext(None, None, tmp_path, tmp_path / "a", 10)
    return judge(INSTANCE, ctx, AUDIT, PytestSession(results, rc))


def test_identical_digests_pass(tmp_path):
    out = judged(tmp_path, runs("a", "a", "a"))
    assert out.status is Status.PASSED and out.measurements["distinct_results"] == {"t.py::test_s": 1}


def test_differing_digest_fails_naming_the_repeat(tmp_path):
    out = judged(tmp_path, runs("a", "a", "b"), rc=0)
    assert (out.status, out.reason_code) == (Status.FAILED, "mismatch")
    assert out.reason == "t.py::test_s gave 2 distinct results over 3 repeats (first differing at repeat 2)"
    assert out.measurements["first_mismatch"] == 2


def test_failed_repeat_fails_and_nothing_run_errors(tmp_path):
    assert judged(tmp_path, runs("a", None, outcome="failed"), rc=1).status is Status.FAILED
    out = judged(tmp_path, [], rc=4)
    assert out.status is Status.ERRORED and "did not run" in out.reason


def test_sanitizer_runs_each_tool_and_fails_on_reported_hazards(tmp_path, monkeypatch):
    from fasttrack.kinds.sanitizer.run import run_sanitizer

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "compute-sanitizer"
    # Stands in for CUDA's tool: racecheck reports a hazard, synccheck is clean.
    fake.write_text(
        '#!/bin/sh\nif [ "$2" = racecheck ]; then echo "========= RACECHECK SUMMARY: 1 hazard displayed"; exit 97; fi\n'
        'echo "========= ERROR SUMMARY: 0 errors"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    audit = SimpleNamespace(id="race", test="t.py::test_x", tools=("racecheck", "synccheck"))
    ctx = RunContext(SimpleNamespace(root=tmp_path), None, tmp_path, tmp_path / "a", 30)
    out = run_sanitizer(
        SimpleNamespace(id="sanitizer/race", kind="sanitizer", name="race", scope_point=None, required=True), ctx, audit
    )
    assert (out.status, out.reason_code) == (Status.FAILED, "hazard")
    assert out.reason == "racecheck: exit 97 (========= RACECHECK SUMMARY: 1 hazard displayed)"
    assert [a.description for a in out.artifacts] == [
        "compute-sanitizer --tool racecheck",
        "compute-sanitizer --tool synccheck",
    ]


def test_sanitizer_missing_is_not_run_dependency(tmp_path, monkeypatch):
    from fasttrack.kinds.sanitizer.run import run_sanitizer

    monkeypatch.setenv("PATH", str(tmp_path))
    ctx = RunContext(SimpleNamespace(root=tmp_path), None, tmp_path, tmp_path / "a", 30)
    out = run_sanitizer(INSTANCE, ctx, SimpleNamespace(id="race", test="t.py::x", tools=()))
    assert (out.status, out.reason_code) == (Status.NOT_RUN, "dependency")
