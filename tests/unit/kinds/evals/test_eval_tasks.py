"""The shipped lm-eval tasks (checks/evals/mrcr, checks/evals/aime25): grading and end to end."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("lm_eval")

from fasttrack.kinds.evals.tasks import load_task, run_side
from fasttrack.targets.lm_adapter import TargetLM
from support.eval_fakes import FakeTarget, solve_mrcr, write_aime, write_mrcr
from support.paths import ROOT


def _utils(folder: str):
    spec = importlib.util.spec_from_file_location(f"{folder}_utils", ROOT / "checks" / "evals" / folder / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mrcr = _utils("mrcr")
aime = _utils("aime25")


def test_mrcr_official_grading_rule():
    doc = {
        "answer": "abcXYZ poem about tapirs: one two",
        "random_string_to_prepend": "abcXYZ",
        "n_needles": 4,
        "n_chars": 1500,
    }
    assert mrcr.grade("poem about tapirs: one two", doc["answer"], "abcXYZ") == 0.0  # no prefix: 0
    assert mrcr.grade("abcXYZ poem about tapirs: one two", doc["answer"], "abcXYZ") == 1.0
    partial = mrcr.grade("abcXYZ poem about tapirs: one", doc["answer"], "abcXYZ")
    import difflib

    assert partial == difflib.SequenceMatcher(None, " poem about tapirs: one", " poem about tapirs: one two").ratio()
    out = mrcr.process_results(doc, [["abcXYZ poem about tapirs: one two", "wrong"]])
    assert out == {"grade": 0.5, "grade_chars_1k_2k": 0.5, "grade_4needle": 0.5}


def test_mrcr_length_bins_cover_every_size_once():
    sizes = [e + off for e in mrcr.LENGTH_BIN_EDGES for off in (-1, 0, 1) if e + off >= 0]
    names = {mrcr.length_bin(n) for n in sizes}
    assert mrcr.length_bin(1023) == "chars_0_1k" and mrcr.length_bin(1024) == "chars_1k_2k"
    declared = {
        m["metric"].removeprefix("grade_")
        for m in _yaml_metrics("mrcr/mrcr.yaml")
        if m["metric"].startswith("grade_chars")
    }
    assert names == declared


def _yaml_metrics(rel):
    from lm_eval.tasks._yaml_loader import load_yaml

    return load_yaml(ROOT / "checks" / "evals" / rel, resolve_func=False)["metric_list"]


def test_mrcr_renderings():
    doc = {
        "prompt": json.dumps(
            [
                {"role": "user", "content": "write a poem"},
                {"role": "assistant", "content": "p1"},
                {"role": "user", "content": "Prepend x to the 1st poem"},
            ]
        )
    }
    assert json.loads(mrcr.doc_to_messages_json(doc))[1] == {"role": "assistant", "content": "p1"}
    assert (
        mrcr.doc_to_text(doc) == "User: write a poem\n\nAssistant: p1\n\nUser: Prepend x to the 1st poem\n\nAssistant:"
    )
    with pytest.raises(ValueError):
        mrcr.messages({"prompt": json.dumps([{"role": "robot", "content": "x"}])})


def test_aime_uses_lm_eval_grading_last_boxed_wins_and_scores_all_repeats():
    doc = {"problem": "p", "answer": "70"}
    scores = aime.process_results(doc, [["\\boxed{12} then \\boxed{70}", "\\boxed{70}", "70?"]])
    assert scores == {"exact_match": pytest.approx(2 / 3), "exact_match_first": 1.0}
    scores = aime.process_results(doc, [["\\boxed{70}", "\\boxed{12}", "\\boxed{70}", "\\boxed{70}"]])
    assert scores == {"exact_match": 0.75, "exact_match_first": 1.0}
    assert aime.process_results(doc, ["\\boxed{70} no, \\boxed{71}"])["exact_match"] == 0.0
    assert "\\boxed{}" in aime.doc_to_text_boxed(doc)


@pytest.mark.parametrize("task, repeats", [("aime25_local", 4), ("aime25_boxed_local", 1)])
def test_aime_local_end_to_end_with_a_fake_model(tmp_path, task, repeats):
    data = write_aime(tmp_path / "aime.jsonl", 12)
    cfg = {"task": task, "task_dir": "checks/evals/aime25", "data_files": str(data), "repeats": repeats}
    resolved = load_task(cfg, ROOT)
    lm = TargetLM(FakeTarget(aime_skill=0.5), name="fake", generation={"temperature": 1.0})
    records = run_side(lm, resolved, range(12), "exact_match")
    assert sorted(records) == list(range(12))
    assert all(len(r.outputs) == repeats for r in records.values())
    if repeats > 1:  # repeats use different seeds, and every one is scored
        assert any(len(set(r.outputs)) > 1 for r in records.values())
        assert any(0 < r.score < 1 for r in records.values())
    assert 0 < sum(r.score for r in records.values()) < 12
    text = resolved.config["doc_to_text"]
    rendered = text(resolved.docs[0]) if callable(text) else text
    assert rendered.startswith("Question:") and rendered.endswith("Answer:")
    assert ("\\boxed{}" in rendered) == (task == "aime25_boxed_local")


@pytest.mark.parametrize("task", ["mrcr_local", "mrcr_text_local"])
def test_mrcr_local_end_to_end(tmp_path, task):
    data = write_mrcr(tmp_path / "mrcr.jsonl", 12)
    resolved = load_task({"task": task, "task_dir": "checks/evals/mrcr", "data_files": str(data)}, ROOT)

    class Transcript(FakeTarget):  # a completion model that reads the plain transcript
        def generate(self, requests):
            out = []
            for r in requests:
                turns = r["prompt"].removesuffix("\n\nAssistant:").split("\n\n")
                msgs = [{"role": t.split(": ", 1)[0].lower(), "content": t.split(": ", 1)[1]} for t in turns]
                out.append(solve_mrcr(msgs))
            return out

    target = FakeTarget() if task == "mrcr_local" else Transcript()
    records = run_side(TargetLM(target, name="fake"), resolved, range(12), "grade")
    assert all(r.score == 1.0 for r in records.values())
    assert len({r.prompt_hash for r in records.values()}) == 12


def test_lm_eval_chat_template_path_renders_with_the_target_template(tmp_path):
    data = write_aime(tmp_path / "aime.jsonl", 3)
    resolved = load_task({"task": "aime25_local", "task_dir": "checks/evals/aime25", "data_files": str(data)}, ROOT)
    target = FakeTarget()
    run_side(TargetLM(target, name="fake"), resolved, range(3), "exact_match", apply_chat_template=True)
    sent = [json.loads(r["prompt"]) for r in target.seen]
    assert all(s["m"][-1]["role"] == "user" and s["m"][-1]["content"].startswith("Question: Let S") for s in sent)


def test_loglikelihood_passes_through_and_missing_support_is_a_target_error():
    from fasttrack.errors import TargetError

    class Req:
        args = ("context", " continuation")

    class Scorer:
        def loglikelihood(self, pairs):
            return [(-1.5, True) for _ in pairs]

    assert TargetLM(Scorer(), name="s").loglikelihood([Req(), Req()]) == [(-1.5, True), (-1.5, True)]
    with pytest.raises(TargetError, match="no loglikelihood"):
        TargetLM(object(), name="s").loglikelihood([Req()])


def test_every_shipped_task_yaml_loads_with_a_unique_name_that_shadows_no_builtin():
    from lm_eval.tasks._yaml_loader import load_yaml

    names = []
    for yml in sorted((ROOT / "checks" / "evals").glob("*/*.yaml")):
        cfg = load_yaml(yml, resolve_func=True)
        assert cfg["output_type"] == "generate_until" and callable(cfg["process_results"]), yml.name
        assert cfg["filter_list"][0]["name"] == "all_samples"  # every repeat is scored
        names.append(cfg["task"])
    assert len(names) == len(set(names)) and {"mrcr", "mrcr_local", "aime25_local", "aime25_all"} <= set(names)
    assert "aime25" not in names  # lm-eval's own task keeps its name
