"""The engine with fake runners: statuses, isolation, timeouts, crashes, selection, resume."""

from __future__ import annotations

import textwrap

import pytest

from fasttrack.engine.run import CheckOptions, run_check
from fasttrack.engine.select import shard_assignment
from fasttrack.evidence import read_evidence_dict
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.plan import CheckInstance
from fasttrack.report.summary import summary_text
from fasttrack.selection import Selection
from support.fake_kinds import fake_kinds
from support.paths import ROOT
from support.projects import materialise

RUNNER_SOURCES = {
    "ft_fake_pass": "def run(instance, context):\n    return context.outcome(instance, Status.PASSED, measurements={'n': 1})\n",
    "ft_fake_fail": "def run(instance, context):\n    return context.outcome(instance, Status.FAILED, reason_code='mismatch', reason='planted')\n",
    "ft_fake_raise": "def run(instance, context):\n    raise RuntimeError('runner bug')\n",
    "ft_fake_raise_here": "ISOLATION = 'inprocess'\ndef run(instance, context):\n    raise RuntimeError('runner bug here')\n",
    "ft_fake_hang": "ISOLATION = 'subprocess'\nimport time\ndef run(instance, context):\n    time.sleep(600)\n",
    "ft_fake_crash": "ISOLATION = 'subprocess'\nimport os, signal\ndef run(instance, context):\n    os.kill(os.getpid(), signal.SIGSEGV)\n",
    # measurements shaped like a probe's, so that --resume finds the earlier evidence verifies
    "ft_fake_probe_pass": "def run(instance, context):\n    return context.outcome(instance, Status.PASSED, "
    "measurements={'probe': instance.name, 'details': {'cases': 1}})\n",
    # an optional dependency met at run time (``import httpx`` inside a function), in a worker and here
    "ft_fake_no_httpx": "ISOLATION = 'subprocess'\ndef run(instance, context):\n"
    "    raise ModuleNotFoundError(\"No module named 'httpx'\", name='httpx')\n",
    "ft_fake_no_httpx_here": "ISOLATION = 'inprocess'\ndef run(instance, context):\n"
    "    raise ModuleNotFoundError(\"No module named 'httpx'\", name='httpx')\n",
    "ft_fake_worker_pass": "ISOLATION = 'subprocess'\nimport os\ndef run(instance, context):\n"
    "    return context.outcome(instance, Status.PASSED, measurements={'pid': os.getpid()})\n",
}


@pytest.fixture
def project(tmp_path, monkeypatch):
    folder = tmp_path / "runners"
    folder.mkdir()
    for name, body in RUNNER_SOURCES.items():
        (folder / f"{name}.py").write_text("from fasttrack.evidence import Status\n" + textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", f"{folder}:{ROOT}")
    return materialise(tmp_path / "p")


def use_plan(specs):
    """specs: (kind, name, runner module or None, runnable, timeout_s, config) -> the kinds that plan them."""
    instances = []
    for kind, name, _, runnable, timeout, config in specs:
        reason = None if runnable else "needs NVIDIA H200 x1; this machine has: cpu"
        instances.append(
            CheckInstance(
                f"{kind}/{name}",
                kind,
                name,
                None,
                True,
                runnable,
                None if runnable else "hardware",
                reason,
                None,
                1.0,
                timeout,
                dict(config),
            )
        )
    return fake_kinds(instances, {kind: module for kind, _, module, *_ in specs})


def go(project, tmp_path, kinds=KINDS, **kw):
    options = CheckOptions(manifest=str(project / "fasttrack.yaml"), out_dir=tmp_path / "out", quiet=True, **kw)
    result = run_check(options, kinds)
    return result, read_evidence_dict(tmp_path / "out")  # schema-validated


def by_name(evidence):
    return {c["name"]: c for c in evidence["checks"]}


def test_all_passed_is_pass_and_exit_0(project, tmp_path, monkeypatch):
    kinds = use_plan([("evals", "a", "ft_fake_pass", True, 10, {}), ("features", "b", "ft_fake_pass", True, 10, {})])
    result, evidence = go(project, tmp_path, kinds)
    assert (result.exit_code, evidence["verdict"]["status"], evidence["run"]["state"]) == (0, "PASS", "complete")
    assert all(c["inputs_digest"] and c["started_at"] for c in evidence["checks"])


def test_statuses_and_reasons_fail_closed(project, tmp_path, monkeypatch):
    kinds = use_plan(
        [
            ("evals", "ok", "ft_fake_pass", True, 10, {}),
            ("features", "bad", "ft_fake_fail", True, 10, {}),
            ("divergence", "bug", "ft_fake_raise", True, 10, {}),
            ("scope_diff", "bug_here", "ft_fake_raise_here", True, 10, {}),
            ("benchmarks", "gpu", "ft_fake_pass", False, 10, {}),
            ("claims", "none", None, True, 10, {}),
        ],
    )
    result, evidence = go(project, tmp_path, kinds)
    checks = by_name(evidence)
    assert result.exit_code == 1 and evidence["verdict"]["status"] == "FAIL"
    assert (checks["bad"]["status"], checks["bad"]["reason"]) == ("failed", "planted")
    # Target kinds run in a worker process: the exception is recorded there, its traceback in the log.
    assert checks["bug"]["status"] == "errored" and "raised RuntimeError: runner bug" in checks["bug"]["reason"]
    assert checks["bug"]["artifacts"][0]["path"].endswith("worker.log")
    assert (
        checks["bug_here"]["status"] == "errored"
        and "raised RuntimeError: runner bug here" in checks["bug_here"]["reason"]
    )
    assert checks["bug_here"]["artifacts"][0]["path"].endswith("runner-error.txt")
    assert (checks["gpu"]["status"], checks["gpu"]["reason_code"]) == ("not_run", "hardware")
    assert "needs NVIDIA H200" in checks["gpu"]["reason"]
    assert (checks["none"]["status"], checks["none"]["reason_code"]) == ("not_run", "dependency")


def test_a_missing_optional_dependency_is_not_run_wherever_it_is_met(project, tmp_path, monkeypatch):
    """A module missing at run time (httpx, imported where it is used) is not_run(dependency), as one
    missing when the runner is imported (numpy) is: never errored (#36 item 12)."""
    kinds = use_plan(
        [
            ("divergence", "worker", "ft_fake_no_httpx", True, 10, {}),
            ("scope_diff", "here", "ft_fake_no_httpx_here", True, 10, {}),
        ],
    )
    _, evidence = go(project, tmp_path, kinds)
    checks = by_name(evidence)
    for name in ("worker", "here"):
        assert (checks[name]["status"], checks[name]["reason_code"]) == ("not_run", "dependency"), checks[name]
    assert "needs the Python module 'httpx', which is not installed here" in checks["worker"]["reason"]
    assert "needs the Python module 'httpx'" in checks["here"]["reason"]


def test_a_relative_out_from_another_directory_reaches_the_workers(project, tmp_path, monkeypatch):
    """--out relative to a directory other than the repository root (where a check's worker runs):
    the worker finds its job and writes its outcome and artifacts under that --out (#36 item 12)."""
    from pathlib import Path

    kinds = use_plan([("divergence", "w", "ft_fake_worker_pass", True, 30, {})])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    options = CheckOptions(manifest=str(project / "fasttrack.yaml"), out_dir=Path("rel-out"), quiet=True)
    run_check(options, kinds)
    evidence = read_evidence_dict(elsewhere / "rel-out")
    assert by_name(evidence)["w"]["status"] == "passed", by_name(evidence)["w"]


def test_worker_isolation_timeout_and_crash(project, tmp_path, monkeypatch):
    kinds = use_plan(
        [
            ("evals", "hang", "ft_fake_hang", True, 1.5, {}),
            ("features", "crash", "ft_fake_crash", True, 30, {}),
            ("divergence", "fine", "ft_fake_worker_pass", True, 30, {}),
        ],
    )
    result, evidence = go(project, tmp_path, kinds)
    checks = by_name(evidence)
    assert result.exit_code == 3
    assert (checks["hang"]["status"], checks["hang"]["reason_code"]) == ("errored", "timeout")
    assert "timeout of 1.5s" in checks["hang"]["reason"]
    assert (checks["crash"]["status"], checks["crash"]["reason_code"]) == ("errored", "crashed")
    assert "SIGSEGV" in checks["crash"]["reason"]
    import os

    assert checks["fine"]["status"] == "passed" and checks["fine"]["measurements"]["pid"] != os.getpid()


def test_timeout_scale_stretches_timeouts(project, tmp_path, monkeypatch):
    kinds = use_plan([("evals", "hang", "ft_fake_hang", True, 2, {})])
    _, evidence = go(project, tmp_path, kinds, timeout_scale=0.5)
    assert "timeout of 1s" in evidence["checks"][0]["reason"]


def test_only_excludes_kinds_visibly_and_uncounted(project, tmp_path, monkeypatch):
    kinds = use_plan([("evals", "a", "ft_fake_pass", True, 10, {}), ("features", "b", "ft_fake_fail", True, 10, {})])
    result, evidence = go(project, tmp_path, kinds, selection=Selection(only=("evals",)))
    checks = by_name(evidence)
    assert result.exit_code == 0 and evidence["verdict"]["status"] == "PASS"
    assert (checks["b"]["status"], checks["b"]["reason_code"], checks["b"]["required"]) == (
        "not_run",
        "out_of_scope",
        False,
    )
    assert "excluded: features" in summary_text(result.evidence, KINDS) and evidence["run"]["only"] == ["evals"]


def test_resume_reuses_unchanged_outcomes_only(project, tmp_path, monkeypatch):
    kinds = use_plan(
        [
            ("features", "a", "ft_fake_probe_pass", True, 10, {"x": 1}),
            ("features", "b", "ft_fake_probe_pass", True, 10, {}),
        ],
    )
    _, first = go(project, tmp_path, kinds)
    kinds = use_plan(
        [
            ("features", "a", "ft_fake_probe_pass", True, 10, {"x": 2}),
            ("features", "b", "ft_fake_probe_pass", True, 10, {}),
        ],
    )
    _, second = go(project, tmp_path, kinds, resume=True)
    a1, a2 = by_name(first)["a"], by_name(second)["a"]
    b1, b2 = by_name(first)["b"], by_name(second)["b"]
    assert a1["inputs_digest"] != a2["inputs_digest"]  # config changed: rerun
    assert (b1["started_at"], b1["inputs_digest"], b1["duration_s"]) == (
        b2["started_at"],
        b2["inputs_digest"],
        b2["duration_s"],
    )
    (project / "toy" / "target.py").write_text("# changed code\n")
    _, third = go(project, tmp_path, kinds, resume=True)
    assert by_name(third)["b"]["inputs_digest"] != b2["inputs_digest"]  # code changed: rerun


def test_shard_assignment_covers_everything_once_and_keeps_kernel_groups_together(project):
    manifest = load_manifest(project / "fasttrack.yaml")
    points = manifest.scope_points(("accelerator", "device_count", "batch"))
    instances = [
        CheckInstance(f"kernels/k@{p.id}", "kernels", "k", p, True, True, None, None, None, 1.0, 10, {}) for p in points
    ]
    instances += [
        CheckInstance(f"evals/e{i}", "evals", f"e{i}", None, True, True, None, None, None, 5.0, 10, {})
        for i in range(3)
    ]
    a = shard_assignment(instances, 2, KINDS)
    assert sorted(a) == sorted(i.id for i in instances) and set(a.values()) == {1, 2}
    assert len({a[i.id] for i in instances if i.kind == "kernels"}) == 1
    assert a == shard_assignment(list(reversed(instances)), 2, KINDS)  # deterministic


def test_instances_of_one_pytest_session_share_its_time(tmp_path):
    """One kernel-test session serves every point of a hardware setup: each point reports its
    share of the session's time, not the first point all of it and the others 0.0 s."""
    project = materialise(tmp_path / "toy")
    options = CheckOptions(
        manifest=str(project / "fasttrack.yaml"),
        out_dir=tmp_path / "out",
        quiet=True,
        base="HEAD",
        selection=Selection(only=("kernels",)),
    )
    run_check(options, KINDS)
    kernels = [c for c in read_evidence_dict(tmp_path / "out")["checks"] if c["kind"] == "kernels"]
    # the three declared points and the sizes between them (<suite>:between), one session
    assert len(kernels) == 4 and all(c["duration_s"] > 0 for c in kernels)
    durations = {c["duration_s"] for c in kernels if not c["name"].endswith(":between")}
    assert len(durations) == 1  # the declared points' tests are alike: equal shares
