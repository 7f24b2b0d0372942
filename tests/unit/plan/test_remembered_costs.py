"""Measured costs remembered per optimisation and machine (fasttrack.plan.remembered): a finished
run's costs come back for the same optimisation on the same kind of machine, a later partial run
updates what it measured and keeps the rest, and a damaged or unwritable memory never breaks a
plan or a check (it only feeds estimates)."""

from __future__ import annotations

import gzip
import json

import pytest

from fasttrack.plan.costs import MeasuredCosts
from fasttrack.plan.remembered import costs_path, recall, remember
from support.paths import ROOT

CPU_RUN = ROOT / "benchmarks" / "results" / "mini-k3-full-scope" / "parts" / "cpu-all-kinds.evidence.json.gz"


@pytest.fixture
def evidence(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTTRACK_CACHE_DIR", str(tmp_path / "cache"))
    return json.loads(gzip.decompress(CPU_RUN.read_bytes()))


def test_a_finished_runs_costs_come_back_for_the_same_optimisation_and_machine(evidence):
    ident, env = evidence["manifest"]["optimisation_id"], evidence["environment"]
    assert recall(ident, env) is None
    path = remember(evidence)
    assert path is not None and path == costs_path(ident, env)
    assert recall(ident, env) == MeasuredCosts.from_evidence(evidence)
    assert recall("another-optimisation", env) is None
    assert recall(ident, {**env, "accelerator": "NVIDIA H200", "accelerator_count": 1}) is None


def test_a_later_partial_run_updates_what_it_measured_and_keeps_the_rest(evidence):
    remember(evidence)
    first = recall(evidence["manifest"]["optimisation_id"], evidence["environment"])
    ran = [c for c in evidence["checks"] if c["status"] in ("passed", "failed") and c.get("duration_s")]
    kept, redone = ran[0], ran[1]
    again = {**redone, "duration_s": redone["duration_s"] * 3 + 7}
    partial = {**evidence, "checks": [again]}
    remember(partial)
    now = recall(evidence["manifest"]["optimisation_id"], evidence["environment"])
    assert first is not None and now is not None
    ident = lambda c: c["id"].split("#", 1)[0]  # noqa: E731
    if ident(kept) != ident(redone):
        assert now.per_instance[ident(kept)] == first.per_instance[ident(kept)]
    assert now.per_instance[ident(redone)] == pytest.approx(again["duration_s"])
    assert set(now.per_instance) == set(first.per_instance)


def test_a_run_that_measured_nothing_is_not_remembered(evidence):
    nothing = {**evidence, "checks": [{**c, "status": "not_run"} for c in evidence["checks"]]}
    assert remember(nothing) is None
    assert recall(evidence["manifest"]["optimisation_id"], evidence["environment"]) is None


@pytest.mark.parametrize("text", ["{not json", "[]", '{"costs": {"per_instance": {"a": -1}}}', '{"costs": {}}'])
def test_a_damaged_memory_is_ignored_and_the_next_run_replaces_it(evidence, text):
    ident, env = evidence["manifest"]["optimisation_id"], evidence["environment"]
    path = costs_path(ident, env)
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    assert recall(ident, env) is None
    assert remember(evidence) == path
    assert recall(ident, env) == MeasuredCosts.from_evidence(evidence)


def test_an_unwritable_cache_leaves_the_run_alone(evidence, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("FASTTRACK_CACHE_DIR", str(blocker / "cache"))  # below a file: cannot be made
    assert remember(evidence) is None
