"""Tests of the task generators: public formats, determinism, grading rules, shipped eval sets."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from mini_k3.data import SEEDS, aime, json_output, mrcr
from mini_k3.tokenizer import ByteTokenizer

EVAL_DIR = Path(__file__).resolve().parents[1] / "data" / "eval"
MRCR_FIELDS = {"prompt", "answer", "random_string_to_prepend", "n_needles", "desired_msg_index",
               "total_messages", "n_chars"}


def test_mrcr_row_follows_the_public_format_and_points_at_the_kth_needle():
    rng = random.Random(3)
    for n_needles in mrcr.N_NEEDLES:
        row = mrcr.make_row_in_bin(rng, n_needles, 1).to_json()
        assert set(row) == MRCR_FIELDS
        messages = json.loads(row["prompt"])
        assert [m["role"] for m in messages[:-1]] == ["user", "assistant"] * ((len(messages) - 1) // 2)
        assert row["total_messages"] == len(messages)
        assert row["n_chars"] == sum(len(m["content"]) for m in messages)
        final = messages[-1]["content"]
        assert final.startswith(f"Prepend {row['random_string_to_prepend']} to the ")
        assert len(row["random_string_to_prepend"]) == 10
        desired = messages[row["desired_msg_index"]]
        assert desired["role"] == "assistant"
        assert row["answer"] == row["random_string_to_prepend"] + desired["content"]
        # the needle request occurs n_needles times, and the desired answer is the k-th of them
        request = messages[row["desired_msg_index"] - 1]["content"]
        needle_idx = [i for i, m in enumerate(messages) if m["role"] == "user" and m["content"] == request]
        assert len(needle_idx) == n_needles
        k = needle_idx.index(row["desired_msg_index"] - 1) + 1
        assert f" {mrcr.ordinal(k)} (1 indexed) " in final
        form, topic = request.removeprefix("write a ").split(" about ")
        assert f"{form} about {topic}" in final


def test_mrcr_rows_land_in_their_length_bins():
    rng = random.Random(5)
    for b, (lo, hi) in enumerate(mrcr.LENGTH_BINS):
        row = mrcr.make_row_in_bin(rng, 4, b)
        assert lo <= row.n_chars <= hi


def test_mrcr_answer_words_are_used_once_per_chat_so_they_can_only_be_found_not_guessed():
    rng = random.Random(11)
    for b in range(len(mrcr.LENGTH_BINS)):
        row = mrcr.make_row_in_bin(rng, 8, b)
        answers = [m["content"] for m in json.loads(row.prompt) if m["role"] == "assistant"]
        words = [w for a in answers for w in a.split(": ", 1)[1].split()]
        assert len(words) == len(set(words)) and set(words) <= set(mrcr.WORDS)
    longest = mrcr.LENGTH_BINS[-1][1]
    with pytest.raises(ValueError, match="made-up words"):
        mrcr.make_row(rng, 2, longest * 3)  # more pairs than the word list can keep unique


def test_mrcr_official_grade():
    assert mrcr.grade("abcpoem x", "abcpoem x", "abc") == 1.0
    assert mrcr.grade("poem x", "abcpoem x", "abc") == 0.0
    assert 0.0 < mrcr.grade("abcpoem y", "abcpoem x", "abc") < 1.0


def test_aime_rows_have_integer_answers_and_long_worked_solutions():
    rows = aime.generate(7, 30)
    for row in rows:
        data = row.to_json()
        assert {"problem", "answer"} <= set(data)
        assert isinstance(row.answer, int) and 0 <= row.answer <= 999
        numbers = [int(x) for x in row.problem.split("=")[1].split(".")[0].split("+")]
        assert sum(numbers) % 1000 == row.answer
        assert aime.last_boxed(row.solution) == str(row.answer)
        assert aime.grade(row.solution, row.answer) == 1.0
        assert len(ByteTokenizer().encode(row.solution)) >= 200


def test_aime_grade_uses_the_last_boxed_answer():
    assert aime.grade(r"\boxed{12} then \boxed{7}", 7) == 1.0
    assert aime.grade(r"\boxed{7} then \boxed{12}", 7) == 0.0
    assert aime.grade("no box 7", 7) == 0.0
    assert aime.grade(r"\boxed{seven}", 7) == 0.0


def test_json_rows_have_schemas_their_answers_satisfy():
    for row in json_output.generate(11, 40):
        assert json_output.grade(row.answer, row.schema) == 1.0
        assert json_output.grade(row.answer[:-1], row.schema) == 0.0
        wrong = json.loads(row.answer)
        wrong["extra"] = 1
        assert json_output.grade(json.dumps(wrong), row.schema) == 0.0


@pytest.mark.parametrize("module,call", [
    (mrcr, lambda m, s: m.generate(s, 3)),
    (aime, lambda m, s: m.generate(s, 5)),
    (json_output, lambda m, s: m.generate(s, 5)),
])
def test_generators_are_deterministic_per_seed(module, call):
    assert call(module, 42) == call(module, 42)
    assert call(module, 42) != call(module, 43)


def test_shipped_eval_sets_match_their_seed_and_cover_three_mrcr_bins():
    rows = [json.loads(line) for line in (EVAL_DIR / "mrcr.jsonl").read_text().splitlines()]
    assert len(rows) == 240 and all(set(r) == MRCR_FIELDS for r in rows)
    bins = {mrcr.length_bin(r["n_chars"]) for r in rows}
    assert len(bins) == 3
    assert {r["n_needles"] for r in rows} == {2, 4, 8}
    first = mrcr.generate(SEEDS["eval"], 80)[0].to_json()
    assert rows[0] == json.loads(json.dumps(first, sort_keys=True))
    aime_rows = [json.loads(line) for line in (EVAL_DIR / "aime25.jsonl").read_text().splitlines()]
    assert aime_rows[0]["problem"] == aime.generate(SEEDS["eval"] + 1, 1)[0].problem
    assert SEEDS["eval"] != SEEDS["train"]
    json_rows = [json.loads(line) for line in (EVAL_DIR / "json.jsonl").read_text().splitlines()]
    assert len(aime_rows) == 200 and len(json_rows) == 100
