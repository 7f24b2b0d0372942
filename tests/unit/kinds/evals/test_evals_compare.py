"""The eval comparison runner end to end through lm-eval, with deterministic fake targets."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("lm_eval")

from fasttrack.kinds.evals.compare import run_eval_comparison
from fasttrack.kinds.evals.items import join_problem as _join_problem
from fasttrack.kinds.evals.tasks import ItemRecord
from fasttrack.targets.lm_adapter import TargetLM, parse_messages
from support.eval_fakes import FakeTarget, write_aime, write_mrcr
from support.paths import ROOT


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("evaldata")
    return {"mrcr": write_mrcr(d / "mrcr.jsonl", 300), "aime": write_aime(d / "aime.jsonl", 150)}


def mrcr_cfg(data, **kw):
    cfg = {
        "id": "mrcr",
        "task": "mrcr_local",
        "task_dir": "checks/evals/mrcr",
        "data_files": str(data["mrcr"]),
        "metric": "grade",
        "margin": 0.05,
        "alpha": 0.05,
        "limit": 300,
        "generation": {"temperature": 0.0, "max_tokens": 64, "seed": 7},
        "bins": {"field": "n_chars", "edges": [0, 2000, 4000]},
    }
    cfg.update(kw)
    return cfg


def compare(cfg, base_target, cand_target, **kw):
    return run_eval_comparison(
        cfg, TargetLM(base_target, name="baseline"), TargetLM(cand_target, name="candidate"), root=ROOT, **kw
    )


def test_matching_sides_pass_every_bin(data):
    r = compare(mrcr_cfg(data), FakeTarget(), FakeTarget())
    m = r.to_measurements()
    assert r.status == "passed", r.reason
    assert m["n"] == 300 and m["diff"] == 0 and m["baseline_mean"] > 0.9
    assert [b["name"] for b in m["bins"]] == ["0-2000", "2000-4000"] and all(b["passed"] for b in m["bins"])
    assert sum(b["n"] for b in m["bins"]) == 300
    json.dumps(m)  # JSON-able
    assert all(not s["changed"] for s in m["samples"]) and len(m["samples"]) == 5


def test_bug_beyond_a_context_position_fails_only_the_long_bin(data):
    # the planted bug garbles answers only when the rendered prompt exceeds 4000 characters
    r = compare(mrcr_cfg(data), FakeTarget(), FakeTarget(break_after_chars=4000))
    m = r.to_measurements()
    assert r.status == "failed" and r.reason_code == "regression"
    short, long_ = m["bins"]
    assert short["status"] == "passed" and short["diff"] == 0
    assert long_["status"] == "failed" and long_["ci_high"] < -0.05
    # the bin records the one-sided bound its rule compared with the margin (the reason quotes it)
    assert long_["upper_bound"] < -0.05 and f"{long_['upper_bound']:.4f}" in long_["reason"]
    assert long_["ci_high"] >= long_["upper_bound"] and short["lower_bound"] > -0.05
    assert "2000-4000" in r.reason
    changed = [s for s in m["samples"] if s["changed"]]
    assert changed and all(s["bin"] == "2000-4000" for s in changed)
    assert all(
        s["baseline_score"] > s["candidate_score"] and s["baseline_output"] != s["candidate_output"] for s in changed
    )


def test_too_few_items_is_underpowered_not_passed(data):
    r = compare(mrcr_cfg(data, limit=30, bins=None), FakeTarget(), FakeTarget())
    assert r.status == "not_run" and r.reason_code == "underpowered"
    assert "need n ≥" in r.reason


def test_different_prompt_rendering_is_an_error(data):
    r = compare(mrcr_cfg(data, limit=10), FakeTarget(), FakeTarget(template="[{role}] {content}"))
    assert r.status == "errored" and r.reason_code == "mismatch"


def test_doc_or_prompt_hash_mismatch_is_reported():
    def rec(doc_hash="d", prompt_hash="p"):
        return ItemRecord(0, doc_hash, prompt_hash, None, 1.0, ("x",))

    assert _join_problem([0], {0: rec()}, {0: rec()}) is None
    assert "different documents" in _join_problem([0], {0: rec()}, {0: rec(doc_hash="e")})
    assert "different prompts" in _join_problem([0], {0: rec()}, {0: rec(prompt_hash="q")})
    assert "missing on the candidate" in _join_problem([0], {0: rec()}, {})


def test_non_finite_logits_on_the_candidate_fail(data):
    r = compare(mrcr_cfg(data, limit=150, bins=None), FakeTarget(), FakeTarget(non_finite_every=50))
    assert r.status == "failed" and "non-finite" in r.reason and r.non_finite["candidate"] == 3


def test_baseline_cache_is_reused_and_can_be_ignored(data, tmp_path):
    identity = {"model": "fake", "revision": "1", "code": "abc", "scope_point": "cpu"}
    cfg = mrcr_cfg(data, limit=150, bins=None)
    first_base = FakeTarget()
    r1 = compare(cfg, first_base, FakeTarget(), cache_dir=tmp_path, baseline_identity=identity)
    assert first_base.calls == 150 and r1.cache["baseline_hits"] == 0
    second_base = FakeTarget()
    r2 = compare(cfg, second_base, FakeTarget(), cache_dir=tmp_path, baseline_identity=identity)
    assert second_base.calls == 0 and r2.cache["baseline_hits"] == 150
    # the hits count at what they cost the first run (the hint for a deciding run's time limits)
    assert r2.cache["baseline_hits_of_unknown_cost"] == 0 and r2.cache["baseline_saved_s"] > 0
    assert r2.to_measurements()["diff"] == r1.to_measurements()["diff"]
    third_base = FakeTarget()
    compare(cfg, third_base, FakeTarget(), cache_dir=tmp_path, baseline_identity=identity, no_cache=True)
    assert third_base.calls == 150
    other = FakeTarget()
    compare(cfg, other, FakeTarget(), cache_dir=tmp_path, baseline_identity={**identity, "code": "def"})
    assert other.calls == 150  # a different baseline code identity is a different key


def test_sequential_mode_stops_early_on_a_clean_candidate(data):
    cfg = mrcr_cfg(data, sequential={"enabled": True, "batch_size": 50, "min_samples": 50})
    r = compare(cfg, FakeTarget(), FakeTarget())
    m = r.to_measurements()
    assert r.status == "passed", r.reason
    assert m["sequential"]["used"] and m["sequential"]["stopped_early"]
    assert m["n"] == m["sequential"]["n_used"] < 300 and m["n"] % 50 == 0


def test_sequential_mode_fails_a_long_context_bug(data):
    cfg = mrcr_cfg(data, sequential={"enabled": True, "batch_size": 50, "min_samples": 50})
    r = compare(cfg, FakeTarget(), FakeTarget(break_after_chars=4000))
    assert r.status == "failed" and r.to_measurements()["n"] < 300


def test_aime_scores_every_repeat(data):
    cfg = {
        "id": "aime",
        "task": "aime25_chat_local",
        "task_dir": "checks/evals/aime25",
        "data_files": str(data["aime"]),
        "metric": "exact_match",
        "margin": 0.1,
        "alpha": 0.05,
        "repeats": 3,
        "generation": {"temperature": 0.7, "max_tokens": 64, "seed": 3},
    }
    base, cand = FakeTarget(aime_skill=0.7), FakeTarget(aime_skill=0.7)
    r = compare(cfg, base, cand)
    m = r.to_measurements()
    # the manifest's generation settings reach both sides; repeat k uses seed + k
    for side in (base, cand):
        assert {(q["temperature"], q["max_tokens"]) for q in side.seen} == {(0.7, 64)}
        assert sorted({q["seed"] for q in side.seen}) == [3, 4, 5] and len(side.seen) == 450
    assert [q["seed"] for q in base.seen] == [q["seed"] for q in cand.seen]
    assert m["n"] == 150 and 0.5 < m["baseline_mean"] < 0.9
    # item scores are means over 3 scored samples: thirds appear, not only 0/1
    assert any(s["baseline_score"] not in (0.0, 1.0) for s in m["samples"])
    assert all(s["baseline_output"].count("\\boxed") == 3 for s in m["samples"])
    assert m["p_mcnemar"] is None  # not a 0/1 metric after averaging repeats
    assert r.status in ("passed", "not_run")  # identical skill: never a false fail
    assert r.status != "failed"


def test_parse_messages_contract():
    assert parse_messages('[{"role":"user","content":"hi"}]') == [{"role": "user", "content": "hi"}]
    assert parse_messages("Question: [1, 2]") is None
    assert parse_messages("[1, 2]") is None
    assert parse_messages('[{"role":"user","content":"hi","x":1}]') is None


def test_manifest_eval_spec_with_shipped_task_dir_is_accepted(data):
    from fasttrack.manifest.sections import EvalSpec

    spec = EvalSpec(
        id="mrcr",
        task="mrcr_local",
        metric="grade",
        margin=0.1,
        alpha=0.05,
        task_dir=None,
        data_files=(str(data["mrcr"]),),
        limit=120,
        generation={"temperature": 0.0, "seed": 1},
    )
    r = compare(spec, FakeTarget(), FakeTarget())
    assert r.status == "passed", r.reason
    assert r.overall.n == 120 and r.n_max == 120


def test_lower_is_better_metric_is_compared_as_one_minus_score(data):
    # the grade read as an error rate: the candidate's bug now "improves" it, and must not fail
    cfg = mrcr_cfg(data, limit=150, bins=None, higher_is_better=False)
    r = compare(cfg, FakeTarget(), FakeTarget(break_after_chars=4000))
    assert r.to_measurements()["diff"] > 0 and r.status != "failed"


def test_different_generation_settings_per_side_are_an_error(data):
    base = TargetLM(FakeTarget(), name="baseline")
    cand = TargetLM(FakeTarget(), name="candidate", generation={"max_tokens": 99})
    r = run_eval_comparison(mrcr_cfg(data, limit=10), base, cand, root=ROOT)
    assert r.status == "errored" and r.reason_code == "mismatch" and "generation settings" in r.reason
