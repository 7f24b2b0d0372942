"""Accuracy as vLLM's lm-eval CI states it: an eval's ``reference`` (an expected value and a
relative tolerance) beside the paired test, judged on fake targets and re-derived by the rule."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fasttrack.kinds.evals import rule
from fasttrack.kinds.reading import Subject
from fasttrack.manifest.sections import EvalSpec, freeze

pytest.importorskip("lm_eval")

from fasttrack.kinds.evals.compare import run_eval_comparison
from fasttrack.targets.lm_adapter import TargetLM
from support.eval_fakes import FakeTarget, aime_config, write_aime
from support.paths import ROOT


@pytest.fixture(scope="module")
def aime(tmp_path_factory):
    return write_aime(tmp_path_factory.mktemp("evaldata") / "aime.jsonl", 60)


def cfg(aime, reference):
    return aime_config(aime, reference=reference)


def outcome_of(result):
    return {"name": "aime", "status": result.status, "measurements": result.to_measurements()}


def subject(reference):
    raw = freeze({"id": "aime", "reference": reference})
    return Subject(SimpleNamespace(evals=(EvalSpec("aime", "aime25_local", "exact_match", 0.05, 0.05, raw=raw),)), {})  # type: ignore[arg-type]


def test_the_rules_as_vllm_states_them():
    assert rule.reference_verdict(0.7544, 0.82, 0.08, "at_least")  # 0.82 * (1 - 0.08)
    assert not rule.reference_verdict(0.75, 0.82, 0.08, "at_least")
    assert rule.reference_verdict(0.99, 0.82, 0.08, "at_least")  # one-sided: better is fine
    assert not rule.reference_verdict(0.99, 0.82, 0.05, "within")  # two-sided: too good is a change too
    assert rule.reference_verdict(0.85, 0.82, 0.05, "within")
    assert rule.reference_verdict(0.20, 0.20, 0.08, "at_least", higher_is_better=False)
    assert not rule.reference_verdict(0.22, 0.20, 0.08, "at_least", higher_is_better=False)
    ref = rule.reference_of(
        {"metrics": [{"name": "acc,none", "value": 0.5}, {"name": "exact_match,strict-match", "value": 0.8}]},
        "exact_match",
    )
    assert ref == {"value": 0.8, "rtol": rule.DEFAULT_RTOL, "rule": "at_least"}


def test_a_candidate_below_the_reference_fails_and_verify_agrees(aime):
    reference = {"metrics": [{"name": "exact_match,strict-match", "value": 0.95}], "rtol": 0.05}
    result = run_eval_comparison(
        cfg(aime, reference),
        TargetLM(FakeTarget(aime_skill=0.5), name="b"),
        TargetLM(FakeTarget(aime_skill=0.5), name="c"),
        root=ROOT,
    )
    assert result.status == "failed" and result.reason_code == "regression"
    assert result.reason.startswith("the candidate's mean") and "reference 0.95" in result.reason
    ref = result.to_measurements()["reference"]
    assert ref["value"] == 0.95 and ref["rtol"] == 0.05 and ref["rule"] == "at_least" and ref["passed"] is False
    assert ref["low"] == pytest.approx(0.9025) and ref["high"] is None
    assert rule.check(outcome_of(result), subject(reference)) == []
    forged = outcome_of(result)
    forged["status"] = "passed"
    assert any("outside the reference's tolerance" in p for p in rule.check(forged, subject(reference)))


def test_a_candidate_at_the_reference_passes_and_the_record_is_checked(aime):
    perfect = FakeTarget(aime_skill=1.0)
    result = run_eval_comparison(
        cfg(aime, {"value": 1.0, "rtol": 0.05, "rule": "within"}),
        TargetLM(FakeTarget(), name="b"),
        TargetLM(perfect, name="c"),
        root=ROOT,
    )
    ref = result.to_measurements()["reference"]
    assert ref["passed"] is True and ref["measured"] == pytest.approx(result.to_measurements()["candidate_mean"])
    assert result.status != "failed"
    # as verify reads a recorded pass (whatever the paired test said of 40 items): the reference's problems
    out = {**outcome_of(result), "status": "passed"}

    def reference_problems(outcome, reference):
        return [p for p in rule.check(outcome, subject(reference)) if "reference" in p]

    within = {"value": 1.0, "rtol": 0.05, "rule": "within"}
    assert reference_problems(out, within) == []
    # verify holds it to the manifest's reference, not to the one it recorded
    assert any("the manifest declares 0.9" in p for p in reference_problems(out, {**within, "value": 0.9}))
    tampered = {**out, "measurements": {**out["measurements"], "reference": {**ref, "measured": 0.5}}}
    assert any("is not the candidate's mean" in p for p in reference_problems(tampered, within))


FAMILY_MANIFEST = """\
fasttrack: 1
optimisation: {{id: tiny-opt, title: Tiny optimisation}}
model: {{id: org/tiny, code_paths: ["src/tiny/**"]}}
switch: {{name: fast, default: false, enable: {{engine_arg: fast}}}}
scope:
  hardware: [{{accelerator: cpu, device_counts: [1], tensor_parallel: [1]}}]
preserve: {{full_context: true, temperature_sampling: true, structured_output: true}}
target: {{kind: python, python: {{factory: "tiny.target:create"}}}}
eval_families:
  accuracy: {{alpha: 0.06}}
evals:
{evals}
"""


def family_manifest(tmp_path, aime):
    from fasttrack.manifest import load_manifest

    line = (
        "  - {{id: {id}, task: aime25_local, task_dir: {task_dir}, data_files: {data}, metric: exact_match, "
        "margin: 0.05, alpha: 0.06, limit: 40, generation: {{temperature: 0.0, max_tokens: 64, seed: 7}}{family}}}"
    )
    evals = [
        line.format(id=i, task_dir=ROOT / "checks/evals/aime25", data=aime, family=", family: accuracy" if f else "")
        for i, f in (("aime_a", True), ("aime_b", True), ("aime_c", True), ("alone", False))
    ]
    path = tmp_path / "fasttrack.yaml"
    path.write_text(FAMILY_MANIFEST.format(evals="\n".join(evals)))
    return load_manifest(path)


def test_a_family_shares_its_alpha_and_verify_rederives_the_share(tmp_path, aime):
    m = family_manifest(tmp_path, aime)
    by_id = {e.id: e for e in m.evals}
    assert by_id["aime_a"].alpha == pytest.approx(0.02) and by_id["alone"].alpha == 0.06
    assert by_id["aime_b"].family["members"] == ("aime_a", "aime_b", "aime_c")
    spec = by_id["aime_a"]
    result = run_eval_comparison(spec, TargetLM(FakeTarget(), name="b"), TargetLM(FakeTarget(), name="c"), root=ROOT)
    measured = result.to_measurements()
    assert measured["alpha"] == pytest.approx(0.02)
    assert measured["family"] == {
        "name": "accuracy",
        "alpha": 0.06,
        "correction": "bonferroni",
        "members": ["aime_a", "aime_b", "aime_c"],
        "adjusted_alpha": pytest.approx(0.02),
    }
    # as verify reads a recorded decision (identical sides on 40 items are underpowered): its alpha's problems
    outcome = {"name": "aime_a", "status": "passed", "measurements": measured}

    def alpha_problems(recorded):
        return [p for p in rule.check(recorded, Subject(m, {})) if "alpha" in p]

    assert alpha_problems(outcome) == []
    # judged at the family's whole alpha instead of its share: verify says so
    problems = alpha_problems({**outcome, "measurements": {**measured, "alpha": 0.06}})
    assert any("the manifest declares 0.02 (its family 'accuracy''s share)" in p for p in problems), problems
