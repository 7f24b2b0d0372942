"""Divergence check by context position, with deterministic fake targets."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from scipy import stats as st

from fasttrack.kinds.divergence.run import (
    position_divergence,
    run_divergence,
    texts_from_eval,
)
from support.eval_fakes import FakeTarget, write_mrcr
from support.paths import ROOT

CFG = {"buckets": [0, 512, 1024, 2048, 4096], "max_mean_kl": 0.01, "max_p99_kl": 0.1, "min_top1_agreement": 0.98}


def _texts(n=4, length=3000, seed=0):
    rng = random.Random(seed)
    return ["".join(rng.choice("abcdefghij klmnop") for _ in range(length)) for _ in range(n)]


def test_kl_matches_scipy_entropy():
    rng = np.random.default_rng(0)
    logits_p, logits_q = rng.normal(size=(5, 7)), rng.normal(size=(5, 7))
    lp = logits_p - np.log(np.exp(logits_p).sum(1, keepdims=True))
    lq = logits_q - np.log(np.exp(logits_q).sum(1, keepdims=True))
    kl, agree = position_divergence(lp, lq)
    expected = [st.entropy(np.exp(lp[i]), np.exp(lq[i])) for i in range(5)]
    assert kl == pytest.approx(expected, rel=1e-10)
    assert list(agree) == list(lp.argmax(1) == lq.argmax(1))
    same, agree_same = position_divergence(lp, lp)
    assert np.all(same == 0) and agree_same.all()


def test_identical_sides_pass_every_bucket():
    r = run_divergence(CFG, FakeTarget(), FakeTarget(), _texts())
    m = r.to_measurements()
    assert r.status == "passed", r.reason
    assert [b["name"] for b in m["buckets"]] == ["0-512", "512-1024", "1024-2048", "2048-4096"]
    assert all(b["mean_kl"] == 0 and b["top1_agreement"] == 1 for b in m["buckets"])
    assert m["positions"] == 4 * 3000


def test_bug_beyond_a_position_fails_only_far_buckets():
    r = run_divergence(CFG, FakeTarget(), FakeTarget(break_after_chars=1500), _texts())
    by_name = {b.name: b for b in r.buckets}
    assert r.status == "failed" and r.reason_code == "regression"
    assert by_name["0-512"].passed and by_name["512-1024"].passed and by_name["0-512"].mean_kl == 0
    assert not by_name["1024-2048"].passed and not by_name["2048-4096"].passed
    assert by_name["2048-4096"].mean_kl > 0.1 and by_name["2048-4096"].top1_agreement < 0.98
    assert "2048-4096" in r.reason and "0-512" not in r.reason


class _NanAfter(FakeTarget):
    def next_token_logprobs(self, tokens):
        lp = super().next_token_logprobs(tokens)
        lp[100] = np.nan
        return lp


def test_non_finite_candidate_logits_fail():
    r = run_divergence(CFG, FakeTarget(), _NanAfter(), _texts(n=1))
    assert r.status == "failed" and "non-finite" in r.reason and r.non_finite_positions["candidate"] == 1


def test_short_prompts_leave_far_buckets_uncovered():
    r = run_divergence(CFG, FakeTarget(), FakeTarget(), _texts(length=600))
    assert r.status == "not_run" and r.reason_code == "uncovered" and "2048-4096" in r.reason


def test_failing_target_is_an_error():
    class Broken(FakeTarget):
        def next_token_logprobs(self, tokens):
            raise RuntimeError("device lost")

    r = run_divergence(CFG, FakeTarget(), Broken(), _texts(n=1))
    assert r.status == "errored" and "device lost" in r.reason


def test_texts_from_eval_are_the_longest_rendered_prompts(tmp_path):
    pytest.importorskip("lm_eval")
    data = write_mrcr(tmp_path / "mrcr.jsonl", 40)
    cfg = {"task": "mrcr_local", "task_dir": "checks/evals/mrcr", "data_files": str(data)}
    texts = texts_from_eval(
        cfg, ROOT, lambda msgs: "".join(f"<{m['role']}>{m['content']}" for m in msgs), max_prompts=3
    )
    assert len(texts) == 3 and len(texts[0]) >= len(texts[1]) >= len(texts[2])
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    longest = max(rows, key=lambda r: r["n_chars"])
    assert texts[0].startswith("<user>") and texts[0].endswith(longest["answer"])


def test_manifest_divergence_section_with_unset_thresholds_uses_defaults():
    from fasttrack.manifest.sections import Divergence

    r = run_divergence(Divergence(buckets=(0, 1024, 2048)), FakeTarget(), FakeTarget(), _texts(n=1, length=2100))
    assert r.status == "passed" and r.thresholds == {"max_mean_kl": 0.01, "max_p99_kl": 0.1, "min_top1_agreement": 0.98}
    assert [b.name for b in r.buckets] == ["0-1024", "1024-2048", ">=2048"]


def test_target_without_distributions_is_not_run():
    r = run_divergence(CFG, FakeTarget(), object(), _texts(n=1))
    assert r.status == "not_run" and r.reason_code == "dependency" and "candidate" in r.reason


def test_texts_are_tokenized_once_and_cut_at_the_last_bucket_edge():
    class Tok:
        def encode(self, text):
            return [ord(c) % 16 for c in text]

    class WithTokenizer(FakeTarget):
        tokenizer = Tok()

        def next_token_logprobs(self, tokens):
            assert isinstance(tokens, list)
            return super().next_token_logprobs(tokens)

    r = run_divergence({"buckets": [0, 512, 1024]}, WithTokenizer(), WithTokenizer(), _texts(n=2, length=3000))
    assert r.status == "passed" and r.positions == 2 * 1024
    assert [b.name for b in r.buckets] == ["0-512", "512-1024"]


def test_thresholds_at_a_dtype_take_its_own_then_the_sections_then_its_builtin_default():
    from fasttrack.manifest.sections import DIVERGENCE_DEFAULTS, DTYPE_DIVERGENCE_DEFAULTS, Divergence

    bf16 = dict(DTYPE_DIVERGENCE_DEFAULTS["bf16"])
    assert Divergence().thresholds() == dict(DIVERGENCE_DEFAULTS) == Divergence().thresholds("fp32")
    assert Divergence().thresholds("bf16") == bf16  # clean bf16 alone exceeds the fp32-sized defaults
    assert bf16["max_mean_kl"] > DIVERGENCE_DEFAULTS["max_mean_kl"]
    stated = Divergence(max_mean_kl=0.02, dtypes={"bf16": {"max_p99_kl": 0.3}})
    # a value the manifest states beats a built-in one: the section's mean, bf16's own p99
    assert stated.thresholds("bf16") == {**bf16, "max_mean_kl": 0.02, "max_p99_kl": 0.3}
    assert stated.thresholds("fp32") == {**DIVERGENCE_DEFAULTS, "max_mean_kl": 0.02}
    assert stated.at_dtype("bf16").max_p99_kl == 0.3 and stated.at_dtype("bf16").buckets == stated.buckets


def test_verify_judges_each_outcome_at_its_own_dtypes_thresholds():
    from fasttrack.kinds.divergence.rule import check
    from fasttrack.kinds.reading import Subject
    from fasttrack.manifest import load_manifest

    manifest = load_manifest(ROOT / "examples" / "mini-k3" / "fasttrack.yaml")  # fp32 and bf16
    bf16, fp32 = manifest.divergence.thresholds("bf16"), manifest.divergence.thresholds("fp32")
    assert bf16["max_mean_kl"] > fp32["max_mean_kl"] == 0.01

    def outcome(dtype: str, mean_kl: float, recorded: dict) -> dict:
        buckets = [{"name": "0-256", "positions": 256, "mean_kl": mean_kl, "p99_kl": 0.01, "top1_agreement": 1.0}]
        m = {"status": "passed", "thresholds": recorded, "buckets": buckets, "non_finite_positions": {}}
        return {"status": "passed", "scope_point": {"dtype": dtype}, "measurements": m}

    subject = Subject(manifest, {})
    assert check(outcome("bf16", 0.03, bf16), subject) == []
    assert any("mean KL 0.03 > 0.01" in p for p in check(outcome("fp32", 0.03, fp32), subject))
    # looser thresholds recorded in place of the dtype's own
    assert any("threshold max_mean_kl" in p for p in check(outcome("fp32", 0.001, bf16), subject))
