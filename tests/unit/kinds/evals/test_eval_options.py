"""lm-eval's options on a declared eval (num_fewshot, apply_chat_template, fewshot_as_multiturn,
model_args) and the absolute min_score floor, through lm-eval with deterministic fake targets."""

from __future__ import annotations

import pytest

pytest.importorskip("lm_eval")

from scipy import stats as st

from fasttrack import stats as S
from fasttrack.kinds.evals.compare import as_eval_config, run_eval_comparison
from fasttrack.kinds.evals.tasks import load_task
from fasttrack.targets.lm_adapter import TargetLM
from support.eval_fakes import FakeTarget, aime_config, write_aime
from support.paths import ROOT


@pytest.fixture(scope="module")
def aime(tmp_path_factory):
    return write_aime(tmp_path_factory.mktemp("evaldata") / "aime.jsonl", 80)


def cfg(aime, **kw):
    return aime_config(aime, **kw)


def compare(config, base, cand):
    return run_eval_comparison(config, TargetLM(base, name="baseline"), TargetLM(cand, name="candidate"), root=ROOT)


def test_num_fewshot_reaches_the_prompts_and_the_task_identity(aime):
    base, cand = FakeTarget(), FakeTarget()
    result = compare(cfg(aime, limit=6, num_fewshot=2), base, cand)
    prompt = base.seen[0]["prompt"]
    assert prompt.count("Answer:") == 3 and prompt.count("Question:") == 3  # two worked examples, then the item
    assert result.to_measurements()["lm_eval_options"] == {"num_fewshot": 2}
    zero = load_task(cfg(aime), ROOT).definition_hash
    assert load_task(cfg(aime, num_fewshot=2), ROOT).definition_hash != zero  # no baseline cache shared


def test_the_chat_template_options_reach_lm_eval(aime):
    base, cand = FakeTarget(), FakeTarget()
    compare(cfg(aime, limit=4, num_fewshot=1, apply_chat_template=True, fewshot_as_multiturn=True), base, cand)
    rendered = base.seen[0]["prompt"]
    assert rendered.startswith('{"t": "<|{role}|>{content}", "m": [') and rendered.count('"role": "user"') == 2


def test_model_args_max_gen_toks_sets_the_token_budget(aime):
    base, cand = FakeTarget(), FakeTarget()
    config = cfg(aime, limit=4, model_args={"max_gen_toks": 21, "num_concurrent": 4})
    config["generation"] = {"temperature": 0.0, "seed": 7}
    compare(config, base, cand)
    assert {r["max_tokens"] for r in base.seen} == {21}


def test_min_score_fails_a_candidate_clearly_below_the_floor(aime):
    weak = compare(cfg(aime, min_score=0.9), FakeTarget(aime_skill=0.3), FakeTarget(aime_skill=0.3))
    assert weak.status == "failed" and weak.reason_code == "regression"
    assert weak.reason.startswith("the candidate scores") and weak.floor["upper"] < 0.9
    # the evidence keeps the min_score check beside the baseline-at-floor flag, not over it
    m = weak.to_measurements()
    assert m["min_score"]["upper"] < 0.9 and m["min_score"]["min_score"] == 0.9 and isinstance(m["floor"], bool)
    fine = compare(cfg(aime, min_score=0.1), FakeTarget(aime_skill=0.3), FakeTarget(aime_skill=0.3))
    assert fine.floor is not None and fine.floor["status"] == "passed"


def test_the_floor_fails_a_true_mean_at_the_floor_at_most_alpha():
    # exact, not simulated: the probability that Clopper-Pearson's upper bound falls below the floor
    for n in (8, 30, 80, 200):
        for floor in (0.3, 0.6, 0.9):
            fails = [
                k for k in range(n + 1) if S.floor_check([1.0] * k + [0.0] * (n - k), floor, 0.05).status == "failed"
            ]
            rate = float(st.binom.cdf(max(fails), n, floor)) if fails else 0.0
            assert rate <= 0.05, (n, floor, rate)


def test_an_eval_spec_keeps_the_options_it_was_written_with():
    from fasttrack.manifest.sections import EvalSpec, freeze

    spec = EvalSpec("e", "t", "m", 0.05, 0.05, limit=9, raw=freeze({"id": "e", "num_fewshot": 3, "limit": 100}))
    config = as_eval_config(spec)
    assert config["num_fewshot"] == 3 and config["limit"] == 9  # the typed field (an override) wins
