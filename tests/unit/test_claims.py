"""Claims lint and assessment, on the Kimi K3 manifest and on small hand-made claims."""

from __future__ import annotations

from pathlib import Path

import pytest

from fasttrack.kinds.claims import lint as C
from fasttrack.manifest import load_manifest

KIMI = Path(__file__).resolve().parents[2] / "examples" / "kimi-k3-latency" / "fasttrack.yaml"
GB300_X16 = {"accelerator": "NVIDIA GB300", "device_count": 16}


@pytest.fixture(scope="module")
def kimi_lints():
    return {lint.claim_id: lint for lint in C.lint_claims(load_manifest(KIMI))}


def test_agentx_comparison_is_flagged_not_comparable(kimi_lints):
    lint = kimi_lints["agentx-p90-224-to-403"]
    assert lint.comparable is False
    assert "gpus: 8 vs 16" in lint.differences
    assert "not_comparable" in lint.labels and "percentile:p90" in lint.labels
    assessed = C.assess_claim(lint, GB300_X16, [{"point": {"batch": 1, "device_count": 16}, "ratio": 1.9}])
    assert assessed.status == C.NOT_COMPARABLE  # even a measurement cannot make it reproduced
    assert "gpus: 8 vs 16" in assessed.reason


def test_842_headline_is_labelled_synthetic_acceptance_with_prefill_excluded(kimi_lints):
    lint = kimi_lints["dspark-842"]
    assert lint.comparable is True
    assert {"synthetic_acceptance", "prefill_excluded", "speculative:dspark"} <= set(lint.labels)
    assert "labelled synthetic_acceptance, prefill_excluded" in lint.summary()
    assessed = C.assess_claim(lint, GB300_X16, [{"point": {"batch": 1, "draft_length": 7}, "ratio": 1.8}])
    assert assessed.status == C.NOT_MEASURABLE and "synthetic acceptance length (6)" in assessed.reason


def test_plain_kimi_claims_are_comparable_and_unlabelled(kimi_lints):
    lint = kimi_lints["b1-8gpu-193"]
    assert lint.comparable and not lint.errors
    assert not {"synthetic_acceptance", "prefill_excluded", "not_comparable"} & set(lint.labels)


def test_gb300_claims_are_not_measurable_on_a_cpu_machine(kimi_lints):
    assessed = C.assess_claim(kimi_lints["b1-16gpu-256"], {"accelerator": "cpu", "device_count": 1})
    assert assessed.status == C.NOT_MEASURABLE
    assert assessed.reason == "needs NVIDIA GB300 x16; this machine has cpu x1"


def test_lower_is_better_metrics_invert_the_ratio(kimi_lints):
    assert C.claimed_speedup(kimi_lints["layer-23-to-13-kernels"]) == pytest.approx((23 / 13, 23 / 13))


def test_claim_without_a_setup_is_an_error():
    bench = {"id": "b", "metric": "decode_tokens_per_s_per_user"}
    lint = C.lint_claim(bench, {"id": "c", "statement": "2x", "baseline": {"value": 1}, "candidate": {"value": 2}})
    assert lint.errors and "no baseline setup is stated" in lint.errors[0]
    assert C.assess_claim(lint, {"accelerator": "cpu"}).status == C.NOT_MEASURABLE


def test_speedup_range_reproduced_only_when_every_matching_point_reaches_it():
    bench = {
        "id": "b",
        "metric": "decode_tokens_per_s_per_user",
        "setups": {"baseline": {"accelerator": "cpu"}, "candidate": {"accelerator": "cpu"}},
    }
    claim = {
        "id": "c",
        "statement": "1.6x-1.7x at batch 16-64",
        "baseline": {},
        "candidate": {},
        "speedup": {"min": 1.6, "max": 1.7},
        "tolerance": 0.05,
        "conditions": {"batch": {"min": 16, "max": 64}},
    }
    lint = C.lint_claim(bench, claim)
    here = {"accelerator": "cpu", "device_count": 1}
    good = [
        {"point": {"batch": 16}, "ratio": 1.65},
        {"point": {"batch": 64}, "ratio": 1.55},
        {"point": {"batch": 1}, "ratio": 0.5},
    ]
    assert C.assess_claim(lint, here, good).status == C.REPRODUCED  # 1.55 >= 1.6 * 0.95; batch 1 is outside the claim
    bad = good + [{"point": {"batch": 32}, "ratio": 1.3}]
    result = C.assess_claim(lint, here, bad)
    assert result.status == C.NOT_REPRODUCED and "measured 1.30x at batch=32" in result.reason
    assert result.measurements()["measured"]["points"] == [{"batch": 16}, {"batch": 64}, {"batch": 32}]


def test_lint_works_on_plain_data_too():
    data = {
        "benchmarks": [
            {
                "id": "b",
                "metric": "x",
                "setups": {"baseline": {"gpus": 8}, "candidate": {"gpus": 16}},
                "claims": [{"id": "c", "statement": "s", "baseline": {"value": 1}, "candidate": {"value": 2}}],
            }
        ]
    }
    (lint,) = C.lint_claims(data)
    assert not lint.comparable and lint.differences == ("gpus: 8 vs 16",)


def test_every_kimi_claim_gets_a_status_and_reason_on_a_cpu_machine():
    assessed = {
        a.lint.claim_id: a
        for a in C.assess_manifest_claims(load_manifest(KIMI), {"accelerator": "cpu", "device_count": 1})
    }
    assert assessed["agentx-p90-224-to-403"].status == C.NOT_COMPARABLE
    assert assessed["b1-8gpu-193"].reason == "needs NVIDIA GB300 x8; this machine has cpu x1"
    assert all(a.status in (C.NOT_MEASURABLE, C.NOT_COMPARABLE) and a.reason for a in assessed.values())
    assert len(assessed) == 7


def test_claims_about_kernels_per_step_and_time_per_layer_are_lower_is_better():
    fixture = Path(__file__).resolve().parents[1] / "fixtures/manifests/valid/vllm-bench-workload.yaml"
    lints = {lint.claim_id: lint for lint in C.lint_claims(load_manifest(fixture))}
    assert C.claimed_speedup(lints["k-2300-to-1300"]) == (2300 / 1300, 2300 / 1300)
    assert lints["layer-130-to-69"].higher_is_better is False


SERVER_FLAG_CLAIM = """fasttrack: 1
optimisation: {id: tiny-opt, title: Tiny optimisation}
model: {id: org/tiny, code_paths: ["src/tiny/**"]}
switch: {name: fast, default: false, enable: {server_flag: --fast}, proof: {source: metrics, metric: tiny_steps_total, label: path}}
scope:
  hardware: [{accelerator: cpu, device_counts: [1], tensor_parallel: [1]}]
preserve: {full_context: true, temperature_sampling: true, structured_output: true}
target:
  kind: vllm
  vllm: {model: org/tiny, candidate: {serve_args: [--fast]}}
benchmarks:
  - id: decode
    metric: decode_tokens_per_s_per_user
    claims:
      - id: c
        statement: s
        baseline: {value: 1.0, setup: {switch: false, engine_args: [--enforce-eager]}}
        candidate: {value: 2.0, setup: {switch: true, engine_args: [--enforce-eager, CANDIDATE]}}
        speedup: 2.0
"""


def test_a_candidate_passing_the_switchs_own_server_flag_is_comparable():
    """#36 item 12's last defect, for a server_flag (an option's value: test_option_arms): the
    switch's own flag in the candidate's engine_args is how it is turned on, no setup difference."""
    from fasttrack.manifest import check_text

    data, problems = check_text(SERVER_FLAG_CLAIM.replace("CANDIDATE", "--fast"))
    assert [p.message for p in problems] == []
    assert [(lint.comparable, lint.differences) for lint in C.lint_claims(data)] == [(True, ())]
    data, problems = check_text(SERVER_FLAG_CLAIM.replace("CANDIDATE", "--max-num-seqs=8"))
    assert any("not comparable" in p.message for p in problems)
    assert [lint.comparable for lint in C.lint_claims(data)] == [False]


def test_difference_claims_compare_stock_and_candidate_in_the_metrics_unit():
    fixture = Path(__file__).resolve().parents[1] / "fixtures/manifests/valid/kernel-micro-benchmarks.yaml"
    lints = {lint.claim_id: lint for lint in C.lint_claims(load_manifest(fixture))}
    fewer, hidden = lints["sixty-fewer-launches"], lints["layer-2.4us-hidden"]
    assert not fewer.errors and fewer.claimed["difference"] == {"value": 60, "unit": "kernels"}
    here = {"accelerator": "NVIDIA H200", "device_count": 1}
    point = {"batch": 1}
    reproduced = C.assess_claim(fewer, here, [{"point": point, "ratio": 1.1, "baseline": 640, "candidate": 578}])
    assert reproduced.status == C.REPRODUCED and "difference of 62 kernels" in reproduced.reason
    assert reproduced.measured and reproduced.measured["difference"] == 62
    short = C.assess_claim(fewer, here, [{"point": point, "ratio": 1.05, "baseline": 640, "candidate": 600}])
    assert short.status == C.NOT_REPRODUCED and "below the claimed 60 kernels" in short.reason
    # lower is better: a candidate slower than stock by 2.4 us is no 2.4 us hidden
    slower = C.assess_claim(hidden, here, [{"point": point, "ratio": 0.97, "baseline": 80.0, "candidate": 82.4}])
    assert slower.status == C.NOT_REPRODUCED
    unrecorded = C.assess_claim(hidden, here, [{"point": point, "ratio": 1.03}])
    assert unrecorded.status == C.NOT_MEASURABLE  # no value of each side: never reproduced
    assert C.assess_claim(hidden, here, []).status == C.NOT_MEASURABLE
