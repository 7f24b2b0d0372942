"""Synthetic speculative acceptance as the engines spell it: found in commands, arguments and
environment; labels the benchmark and every claim measured with it; an error where the manifest
says acceptance is measured (the fixtures under tests/fixtures/manifests/invalid)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fasttrack.environment import Environment
from fasttrack.kinds.claims import lint as C
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.manifest.acceptance import in_arguments, in_environment, in_target
from fasttrack.plan import build_plan, render_plan_table

VALID = Path(__file__).resolve().parents[2] / "fixtures/manifests/valid"
# The exact spelling of vLLM's synthetic acceptance (anchors.md: vLLM's synthetic acceptance).
VLLM = (
    '{"method": "eagle3", "model": "...", "num_speculative_tokens": 4, '
    '"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 3.24}'
)


@pytest.mark.parametrize(
    "words",
    [
        ["vllm", "serve", "m", "--speculative-config", VLLM],
        ["vllm", "serve", "m", f"--speculative-config={VLLM}"],
        ["bash", "-c", f"vllm serve m --speculative-config '{VLLM}' --port 8000"],
    ],
    ids=["two-words", "equals", "shell-line"],
)
def test_vllm_synthetic_acceptance_is_found_in_every_spelling(words):
    assert in_arguments(words) == [
        ("--speculative-config rejection_sample_method=synthetic, synthetic_acceptance_length=3.24", 3.24)
    ]


def test_other_spellings_and_what_is_not_synthetic():
    assert in_arguments(["--speculative-config.rejection_sample_method", "synthetic"])
    assert in_arguments(["--speculative-config.synthetic_acceptance_length=2.5"])[0][1] == 2.5
    assert in_arguments(['--speculative-config={"synthetic_acceptance_rates": [0.9, 0.8]}'])
    placeholder = (
        '{"method": "eagle3", "num_speculative_tokens": {draft_length}, "rejection_sample_method": "synthetic"}'
    )
    assert in_arguments(["--speculative-config", placeholder])  # {draft_length} read as a number
    unreadable = '{"rejection_sample_method": "synthetic", "synthetic_acceptance_length": $LEN}'
    assert in_arguments(["--speculative-config", unreadable])  # not JSON: the keys themselves
    for real in ('{"method": "eagle3", "num_speculative_tokens": 4}', '{"rejection_sample_method": "block"}'):
        assert in_arguments(["--speculative-config", real]) == []
    assert in_arguments(["--other-config", VLLM]) == []


def test_sglang_simulated_acceptance_variable():
    assert in_environment({"SGLANG_SIMULATE_ACC_LEN": "3.5"}) == [("SGLANG_SIMULATE_ACC_LEN=3.5", 3.5)]
    assert in_environment({"SGLANG_SIMULATE_ACC_LEN": "-1"}) == []  # SGLang's default: off
    assert in_environment({"SGLANG_SIMULATE_ACC_LEN": "0"}) == []
    assert in_environment({"SGLANG_SIMULATE_ACC_LEN": "$ACC"}) == [
        ("SGLANG_SIMULATE_ACC_LEN=$ACC", None)
    ]  # unknown: on
    assert in_arguments(["env", "SGLANG_SIMULATE_ACC_LEN=2.49", "python3", "-m", "sglang.launch_server"])
    assert in_environment({"SERVE_ARGS": f"--speculative-config '{VLLM}'"})  # a variable holding the arguments


def test_the_benchmark_and_its_claims_are_labelled_synthetic():
    m = load_manifest(VALID / "synthetic-acceptance-labelled.yaml")
    [found] = in_target(m.data)
    assert found.where == ("target", "openai", "speculative_args") and found.acceptance_length == 3.24
    env = Environment("NVIDIA H200", (), "test", "none", "cpu", 2, "Linux", "3.11")
    plan = build_plan(m, env, KINDS)
    bench = next(i for i in plan.instances if i.kind == "benchmarks")
    assert bench.config[C.DETECTED_KEY][0]["how"].startswith("--speculative-config rejection_sample_method=synthetic")
    claim = next(i for i in plan.instances if i.kind == "claims")
    lint = C.lint_claim(claim.config["benchmark"], claim.config["claim"])
    # labelled synthetic, not only speculative:eagle3, and the lint says what forced it
    assert "synthetic_acceptance" in lint.labels and "speculative:eagle3" in lint.labels
    assert "acceptance forced by target.openai.speculative_args: --speculative-config" in lint.summary()
    assert "synthetic speculative acceptance is set by the target" in render_plan_table(plan)


def test_a_claims_own_engine_args_label_it():
    benchmark = {"id": "b", "metric": "decode_tokens_per_s_per_user", "setups": {"baseline": {}, "candidate": {}}}
    claim = {
        "id": "c",
        "statement": "s",
        "baseline": {"value": 1.0},
        "candidate": {"value": 2.0, "setup": {"engine_args": ["--speculative-config", VLLM]}},
    }
    lint = C.lint_claim(benchmark, claim)
    assert "synthetic_acceptance" in lint.labels
    assert lint.synthetic_sources[0]["acceptance_length"] == 3.24


def test_a_source_set_in_several_places_is_listed_once_with_its_places():
    """The same setting on both sides is one source naming both places, not one line per place
    (#36 item 12); validate still points at each place."""
    from fasttrack.manifest.acceptance import benchmark_synthetic, describe

    data = {
        "target": {
            "kind": "openai",
            "openai": {
                "baseline": {"command": ["srv"], "env": {"SGLANG_SIMULATE_ACC_LEN": "3.5"}},
                "candidate": {"command": ["srv"], "env": {"SGLANG_SIMULATE_ACC_LEN": "3.5"}},
            },
        }
    }
    assert len(in_target(data)) == 2  # each place, for validate's file:line errors
    assert describe(in_target(data)) == (
        "target.openai.baseline.env, target.openai.candidate.env: SGLANG_SIMULATE_ACC_LEN=3.5, acceptance length 3.5"
    )
    spec = ["--speculative-config", VLLM]
    benchmark = {"id": "b", "setups": {"baseline": {"engine_args": spec}, "candidate": {"engine_args": spec}}}
    [env, flag] = [s.to_dict() for s in benchmark_synthetic(data, benchmark)]
    assert env["where"] == "target.openai.baseline.env, target.openai.candidate.env"
    assert flag["where"] == "benchmarks.b.setups.baseline, benchmarks.b.setups.candidate"
    claim = {"id": "c", "statement": "s", "baseline": {"value": 1.0, "setup": {"engine_args": spec}}}
    claim["candidate"] = {"value": 2.0, "setup": {"engine_args": spec}}
    lint = C.lint_claim({**benchmark, C.DETECTED_KEY: [env, flag]}, claim)
    assert [s["how"] for s in lint.synthetic_sources] == [env["how"], flag["how"]]
    assert lint.synthetic_sources[1]["where"] == (
        "benchmarks.b.setups.baseline, benchmarks.b.setups.candidate, claim.baseline.setup.engine_args, "
        "claim.candidate.setup.engine_args"
    )
    assert lint.summary().count("SGLANG_SIMULATE_ACC_LEN") == 1


def test_the_drafting_servers_own_env_is_searched_too_and_counts_at_draft_lengths_only():
    for kind, target in (
        ("vllm", {"model": "m", "speculative_env": {"SERVE_ARGS": f"--speculative-config '{VLLM}'"}}),
        (
            "openai",
            {
                "baseline": {"command": ["srv"]},
                "candidate": {"command": ["srv"]},
                "speculative_env": {"SGLANG_SIMULATE_ACC_LEN": "2.5"},
            },
        ),
    ):
        [found] = in_target({"target": {"kind": kind, kind: target}})
        assert found.where == ("target", kind, "speculative_env") and found.drafts_only
