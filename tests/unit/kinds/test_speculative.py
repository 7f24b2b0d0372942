"""The speculative-decoding check over the fake target: equal greedy output AND real acceptance."""

from __future__ import annotations

from pathlib import Path

import pytest

from fasttrack.evidence import Status
from fasttrack.kinds.context import RunContext
from fasttrack.kinds.speculative import run as speculative
from fasttrack.manifest import ScopePoint, load_manifest
from fasttrack.plan import CheckInstance
from fasttrack.probes.content import prompts
from fasttrack.probes.fake import FakeTarget

FAKE_MANIFEST = Path(__file__).resolve().parents[1] / "probes" / "fake_manifest.yaml"


def run_at(tmp_path: Path, draft_length: int, faults=(), minimum=1.2):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "fasttrack.yaml"
    path.write_text(FAKE_MANIFEST.read_text().replace("faults: []", f"faults: {list(faults)}"))
    manifest = load_manifest(path)
    point = ScopePoint.of({"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1, "draft_length": draft_length})
    config = {"method": "ngram", "draft_lengths": [1, 4, 7], "min_acceptance_length": minimum}
    instance = CheckInstance(
        f"speculative/ngram@{point.id}", "speculative", "ngram", point, True, True, None, None, None, 1.0, 60.0, config
    )
    return speculative.run(instance, RunContext(manifest, None, tmp_path, tmp_path / "artifacts", 60.0))


@pytest.mark.parametrize("draft_length", [1, 4, 7])
def test_clean_speculation_passes_with_measured_acceptance(tmp_path, draft_length):
    outcome = run_at(tmp_path, draft_length)
    assert outcome.status is Status.PASSED, outcome.reason
    m = outcome.measurements
    assert m["greedy_equal"] is True and m["mismatch_at"] is None
    assert m["draft_length"] == draft_length
    assert m["acceptance_length"] >= 1.2 and m["drafts"] > 0


def test_wrong_token_accepted_at_draft_length_7_fails_only_there(tmp_path):
    bad = run_at(tmp_path, 7, ["wrong_draft_accept_7"])
    assert bad.status is Status.FAILED and bad.reason_code == "mismatch"
    assert "at draft length 7 greedy output differs from non-speculative decoding at token" in bad.reason
    assert bad.measurements["mismatch_at"]["token"] >= 0 and bad.measurements["greedy_equal"] is False
    assert run_at(tmp_path, 4, ["wrong_draft_accept_7"]).status is Status.PASSED


def test_every_draft_rejected_fails_on_acceptance_although_outputs_match(tmp_path):
    outcome = run_at(tmp_path, 4, ["rejects_all_drafts"])
    assert outcome.measurements["greedy_equal"] is True
    assert outcome.status is Status.FAILED and outcome.reason_code == "regression"
    assert (
        "mean acceptance length 1.00 tokens/step at draft length 4 is below the declared minimum 1.2" in outcome.reason
    )


def test_acceptance_length_counts_tokens_per_drafting_step():
    target = FakeTarget("candidate", draft_length=3)
    reference = FakeTarget("candidate")
    result = speculative.check_draft_length(reference, target, 3, None, prompts()["speculative"][:1])
    m = result.measurements
    assert result.status == "passed"
    assert m["acceptance_length"] == pytest.approx(1 + m["accepted_tokens"] / m["drafts"])
    assert 0 < m["accepted_tokens"] <= m["draft_tokens"] <= 3 * m["drafts"]


def test_missing_counters_is_not_a_pass():
    class NoCounters(FakeTarget):
        def speculative_counters(self):
            return None

    result = speculative.check_draft_length(FakeTarget(), NoCounters(draft_length=2), 2, 1.2, ["abc abc abc"])
    assert result.status == "not_run" and result.reason_code == "dependency"


def test_clean_speculation_records_stocks_acceptance_on_the_same_prompts(tmp_path):
    m = run_at(tmp_path, 4).measurements
    assert m["stock_acceptance_length"] is not None and m["stock_drafts"] > 0
    assert m["acceptance_ratio"] == pytest.approx(m["acceptance_length"] / m["stock_acceptance_length"])
    assert m["acceptance_margin"] == pytest.approx(0.1)
    assert len(m["stock_per_prompt"]) == len(m["cases"])


@pytest.mark.parametrize("draft_length", [1, 4, 7])
def test_a_drafter_off_by_one_above_the_floor_fails_against_stock(tmp_path, draft_length):
    """The issue's planted class: outputs equal, acceptance above the absolute floor, well below stock's."""
    outcome = run_at(tmp_path, draft_length, ["draft_off_by_one"])
    m = outcome.measurements
    assert m["greedy_equal"] is True and m["acceptance_length"] >= 1.2  # the floor alone would pass it
    assert outcome.status is Status.FAILED and outcome.reason_code == "regression", outcome.reason
    assert "below stock's" in outcome.reason and m["acceptance_ratio"] < 0.9


def test_a_candidate_within_the_margin_of_stock_passes_and_one_past_it_fails():
    from fasttrack.kinds.speculative.run import SpeculativeResult
    from fasttrack.kinds.speculative.stock import judge_against_stock
    from fasttrack.probes.base import SpeculativeCounters

    own = SpeculativeResult("passed", None, None, {"draft_length": 3, "acceptance_length": 1.8})
    stock = SpeculativeCounters(drafts=10, draft_tokens=30, accepted_tokens=10)  # 2.0 tokens/step
    assert judge_against_stock(own, stock, [], 0.1).status == "passed"  # 1.8 = 0.9 x 2.0
    assert judge_against_stock(own, stock, [], 0.05).status == "failed"
    none = judge_against_stock(own, SpeculativeCounters(0, 0, 0), [], 0.1)
    assert none.status == "not_run" and none.reason_code == "dependency"
    assert judge_against_stock(own, None, [], 0.1).status == "not_run"


def test_the_declared_margin_reaches_the_check(tmp_path):
    path = tmp_path / "fasttrack.yaml"
    path.write_text(
        FAKE_MANIFEST.read_text()
        .replace("faults: []", "faults: [draft_off_by_one]")
        .replace("min_acceptance_length: 1.2}", "min_acceptance_length: 1.2, acceptance_margin: 0.9}")
    )
    manifest = load_manifest(path)
    assert manifest.scope.speculative.acceptance_margin == pytest.approx(0.9)
    point = ScopePoint.of({"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1, "draft_length": 4})
    config = manifest.section("scope")["speculative"]
    instance = CheckInstance(
        f"speculative/ngram@{point.id}", "speculative", "ngram", point, True, True, None, None, None, 1.0, 60.0, config
    )
    outcome = speculative.run(instance, RunContext(manifest, None, tmp_path, tmp_path / "artifacts", 60.0))
    assert outcome.status is Status.PASSED, outcome.reason  # a 90 % margin tolerates the off-by-one drafter


def test_with_pooled_drafting_servers_stock_runs_beside_the_candidate_and_judges_the_same(tmp_path, monkeypatch):
    """Where the run's pool started both drafting servers (each its own processes), stock's
    prompts run in a thread of their own while the candidate's run; the verdict is unchanged."""
    import threading

    sequential = run_at(tmp_path / "one", 4, ["draft_off_by_one"])
    threads: list[str] = []
    measure = speculative.per_prompt_acceptance

    def recorded(target, prompts, max_tokens):
        threads.append(threading.current_thread().name)
        return measure(target, prompts, max_tokens)

    monkeypatch.setattr(speculative, "prestart_sides", lambda *a, **k: True)
    monkeypatch.setattr(speculative, "per_prompt_acceptance", recorded)
    beside = run_at(tmp_path / "two", 4, ["draft_off_by_one"])
    assert threads and all(name.startswith("speculative-stock") for name in threads)
    assert beside.status is sequential.status is Status.FAILED
    assert beside.reason == sequential.reason
    assert beside.measurements["stock_per_prompt"] == sequential.measurements["stock_per_prompt"]


def test_a_failed_candidate_is_judged_without_stock_even_when_stock_ran_beside_it(tmp_path, monkeypatch):
    """Stock's side failing in its own thread does not replace the candidate's own verdict."""
    from fasttrack.errors import TargetError

    def broken(*_a, **_k):
        raise TargetError("stock's drafting server died")

    monkeypatch.setattr(speculative, "prestart_sides", lambda *a, **k: True)
    monkeypatch.setattr(speculative, "per_prompt_acceptance", broken)
    bad = run_at(tmp_path, 7, ["wrong_draft_accept_7"])
    assert bad.status is Status.FAILED and bad.reason_code == "mismatch"
    clean = run_at(tmp_path / "clean", 4)
    assert clean.status is not Status.PASSED and "stock's drafting server died" in clean.reason
