"""fasttrack.verification: each kind's status re-derived from its measurements, and the plan
coverage. Evidence shaped as runs write it (support.planned_evidence) verifies; each planted
contradiction is named."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from fasttrack.evidence import canonical_bytes
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.verification import rederive
from fasttrack.verification.coverage import plan_problems
from support.paths import EXAMPLE, ROOT
from support.planned_evidence import narrowed, planned_evidence

FAKE = ROOT / "tests" / "unit" / "probes" / "fake_manifest.yaml"  # every kind but kernels and audits
MINI = EXAMPLE / "fasttrack.yaml"  # kernels, stress, sanitizer, evals, divergence, ...


def plain(manifest_path) -> tuple[dict[str, Any], Any]:
    evidence = planned_evidence(manifest_path)
    return json.loads(canonical_bytes(evidence.to_dict())), load_manifest(manifest_path)


def test_every_kind_has_a_rule_and_its_runner_judges_with_the_rules_own_thresholds():
    """One pass rule per kind: the runners take their thresholds from the kind's rule module (the
    one `fasttrack verify` re-derives with), never a copy."""
    from fasttrack.kinds.benchmarks import decide
    from fasttrack.kinds.benchmarks import rule as benchmarks_rule
    from fasttrack.kinds.divergence import rule as divergence_rule
    from fasttrack.kinds.divergence import run as divergence
    from fasttrack.kinds.kernels import rule as kernels_rule
    from fasttrack.kinds.kernels import run as kernels

    assert all(callable(kind.check) for kind in KINDS.values())
    assert decide.not_slower_verdict is benchmarks_rule.not_slower_verdict
    assert divergence.bucket_verdict is divergence_rule.bucket_verdict
    assert kernels.MAX_LISTED is kernels_rule.MAX_LISTED
    from fasttrack.kinds.features import rule as features_rule
    from fasttrack.kinds.speculative import rule as speculative_rule
    from fasttrack.kinds.speculative import stock
    from fasttrack.probes import mixed_batch

    assert stock.below_stock is speculative_rule.below_stock
    assert mixed_batch.MIN_POWER == features_rule.MIXED_BATCH_MIN_POWER


@pytest.mark.parametrize("path", [FAKE, MINI, ROOT / "examples" / "kimi-k3-latency" / "fasttrack.yaml"])
def test_evidence_as_runs_write_it_verifies(path):
    evidence, manifest = plain(path)
    assert rederive(evidence, manifest, KINDS) == [] and plan_problems(evidence, manifest, KINDS) == []


def first(evidence: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in evidence["checks"] if c["kind"] == kind)


def flip(evidence: dict[str, Any], kind: str) -> dict[str, Any]:
    c = first(evidence, kind)
    c.update(status="failed", reason_code="regression", reason="x")
    return c


M = Callable[[dict[str, Any]], Any]
PASSED_BUT: list[tuple[str, M, str]] = [
    ("kernels", lambda m: m.update(failed=1, passed=0), "kernel test(s) failed or errored here"),
    ("kernels", lambda m: m.update(passed=0, skipped=1), "no kernel test passed here"),
    ("kernels", lambda m: m.pop("tests"), "records no test counts"),
    ("stress", lambda m: m.update(distinct_results={"test_stress": 2}), "gave more than one result"),
    ("stress", lambda m: m.update(repeats=1), "the manifest declares"),
    ("sanitizer", lambda m: m.update(errors=[{"kind": "race"}]), "the sanitizer reported 1 error"),
    ("evals", lambda m: m.update(lower_bound=-1.0), "is not above"),
    ("evals", lambda m: m.update(n=10), "underpowered"),
    ("evals", lambda m: m.update(margin=0.5), "the manifest declares"),
    ("evals", lambda m: m.update(floor=True), "at the floor"),
    ("evals", lambda m: m.update(non_finite={"baseline": 0, "candidate": 2}), "non-finite logits"),
    ("divergence", lambda m: m["buckets"][-1].update(mean_kl=0.5), "mean KL 0.5 > 0.01"),
    ("divergence", lambda m: m["buckets"][0].update(positions=0), "no positions"),
    ("divergence", lambda m: m["thresholds"].update(max_mean_kl=1.0), "threshold max_mean_kl"),
    ("features", lambda m: m.update(details={}), "recorded nothing it compared"),
    ("features", lambda m: m.update(probe="other"), "records probe 'other'"),
    ("speculative", lambda m: m.update(greedy_equal=False), "greedy output differs"),
    ("speculative", lambda m: m.update(acceptance_length=1.0), "below the minimum 1.2"),
    ("speculative", lambda m: m.update(drafts=0), "no draft was proposed"),
    ("speculative", lambda m: m.update(stock_acceptance_length=None), "no acceptance length of stock"),
    ("speculative", lambda m: m.update(stock_acceptance_length=2.2), "more than 10% below stock's 2.2"),
    (
        "benchmarks",
        lambda m: m.update(ratio=0.5, pair_ratios=[0.5] * 7, ratio_ci=[0.4, 0.6]),
        "does not reach 1 - 0.05",
    ),
    ("benchmarks", lambda m: m.update(ratio_ci=[None, None]), "lower bound None does not reach"),
    ("benchmarks", lambda m: m.update(ratio=0.9), "not the median"),
    ("benchmarks", lambda m: m.update(margin=0.5), "judged at a margin of 0.5; the manifest's is 0.05"),
    ("switch", lambda m: m["default_path_counts"].update(latency_specialized=4.0), "ran with default settings"),
    ("switch", lambda m: m["candidate_by_batch"].pop("8"), "never ran at batch 8"),
    ("scope_diff", lambda m: m.update(changed=["setup.cfg"]), "lie outside the code paths"),
]


@pytest.mark.parametrize(("kind", "change", "words"), PASSED_BUT, ids=[f"{k}-{w[:20]}" for k, _, w in PASSED_BUT])
def test_a_pass_its_measurements_contradict_is_named(kind, change, words):
    evidence, manifest = plain(MINI if kind in ("kernels", "stress", "sanitizer", "evals") else FAKE)
    outcome = first(evidence, kind)
    change(outcome["measurements"])
    problems = rederive(evidence, manifest, KINDS)
    assert any(p.startswith(outcome["id"]) and words in p for p in problems), problems


@pytest.mark.parametrize("kind", ["kernels", "stress", "evals", "divergence", "scope_diff"])
def test_a_fail_its_measurements_do_not_show_is_named(kind):
    evidence, manifest = plain(MINI if kind in ("kernels", "stress", "evals") else FAKE)
    outcome = flip(evidence, kind)
    assert any(p.startswith(outcome["id"]) and "failed, but" in p for p in rederive(evidence, manifest, KINDS))


def test_claims_are_linted_again():
    evidence, manifest = plain(FAKE)
    claim = first(evidence, "claims")
    claim.update(status="errored", required=True)
    assert any("linting the manifest's claim gives passed" in p for p in rederive(evidence, manifest, KINDS))


def test_plan_coverage_names_missing_unplanned_and_relabelled_outcomes():
    evidence, manifest = plain(MINI)
    original = copy.deepcopy(evidence)
    evidence["checks"] = [c for c in evidence["checks"] if c["kind"] != "divergence"]
    assert any("planned, but the evidence has no outcome for it" in p for p in plan_problems(evidence, manifest, KINDS))

    evidence = copy.deepcopy(original)
    extra = {**first(evidence, "evals"), "id": "evals/invented@x", "name": "invented"}
    evidence["checks"].append(extra)
    assert plan_problems(evidence, manifest, KINDS) == [
        "evals/invented@x: a required outcome the manifest's plan does not have"
    ]
    extra["required"] = False  # a benchmark's per-point claim outcome is such an optional extra
    assert plan_problems(evidence, manifest, KINDS) == []

    evidence = copy.deepcopy(original)
    hidden = first(evidence, "evals")
    hidden.update(status="not_run", reason_code="out_of_scope", required=False)  # hidden as "excluded"
    assert any(
        "the manifest makes it required, but it is recorded as not required" in p
        for p in plan_problems(evidence, manifest, KINDS)
    )


def test_a_selection_the_outcomes_do_not_follow_is_named():
    ev = narrowed(planned_evidence(MINI), only=("kernels",))
    evidence = json.loads(canonical_bytes(ev.to_dict()))
    manifest = load_manifest(MINI)
    assert plan_problems(evidence, manifest, KINDS) == []
    evals = first(evidence, "evals")
    evals.update(status="passed", reason_code=None, required=True)  # counted although --only kernels left it out
    assert any("the run's selection left it out" in p for p in plan_problems(evidence, manifest, KINDS))


def test_a_promised_speed_up_must_be_reached_by_the_lower_bound(tmp_path):
    text = FAKE.read_text().replace(
        "    repeats: 5\n", "    repeats: 5\n    expect: {min_speedup: 1.5, points: {batch: [1]}}\n", 1
    )
    path = tmp_path / "fasttrack.yaml"
    path.write_text(text)
    evidence, manifest = plain(path)
    assert rederive(evidence, manifest, KINDS) == []
    at_1 = next(c for c in evidence["checks"] if c["kind"] == "benchmarks" and c["scope_point"]["batch"] == 1)
    assert at_1["measurements"]["promise"] == 1.5
    at_1["measurements"]["ratio_ci"][0] = 1.2  # a lower bound short of the promise, still above 1
    assert any("does not reach the promised 1.5x" in p for p in rederive(evidence, manifest, KINDS))
    at_1["measurements"].update(promise=None, ratio_ci=[1.6, 2.0])  # judged by the wrong rule
    assert any("the manifest promises 1.5x here" in p for p in rederive(evidence, manifest, KINDS))


def test_an_instance_that_reports_per_part_is_covered_by_its_parts_and_only_by_them():
    """A vllm_bench instance with several concurrencies has outcomes '<id>#concurrency=<c>' and no
    bare '<id>': the plan is covered by its parts of the same kind; a census proof beside them
    (kind switch) is no part of it."""
    evidence = json.loads(canonical_bytes(planned_evidence(MINI).to_dict()))
    manifest = load_manifest(MINI)
    bench = first(evidence, "benchmarks")
    parts = [{**bench, "id": f"{bench['id']}#concurrency={c}"} for c in (1, 8)]
    census = {**bench, "id": f"{bench['id']}#concurrency=1#census", "kind": "switch"}
    checks = [c for c in evidence["checks"] if c["id"] != bench["id"]]
    assert plan_problems({**evidence, "checks": [*checks, *parts, census]}, manifest, KINDS) == []
    missing = plan_problems({**evidence, "checks": [*checks, census]}, manifest, KINDS)
    assert missing == [f"{bench['id']}: planned, but the evidence has no outcome for it"]
