"""Semantic rules beyond the fixtures: warnings, lower-is-better speedups, command placeholders."""

from pathlib import Path

import pytest

from fasttrack.manifest import ScopePoint, check_text, render_command

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures/manifests"
MINIMAL = (FIXTURES / "valid/minimal.yaml").read_text()


def problems_of(text):
    _, problems = check_text(text)
    return [(p.severity, p.message) for p in problems]


def test_sanitizer_without_gpu_in_scope_is_a_warning_only():
    text = MINIMAL + "audits:\n  - {id: rc, kind: compute_sanitizer, test: 't.py::t', tools: [racecheck]}\n"
    [(severity, message)] = problems_of(text)
    assert severity == "warning" and "can never run" in message


def test_lower_is_better_speedup_is_baseline_over_candidate():
    bench = (
        "benchmarks:\n  - id: b\n    metric: tpot_ms\n"
        "    setups: {baseline: {gpus: 1}, candidate: {gpus: 1}}\n"
        "    claims:\n      - {id: c, statement: s, baseline: {value: 20}, candidate: {value: 10}, speedup: SPEEDUP}\n"
    )
    assert problems_of(MINIMAL + bench.replace("SPEEDUP", "2.0")) == []
    [(severity, message)] = problems_of(MINIMAL + bench.replace("SPEEDUP", "0.5"))
    assert severity == "error" and "gives 2.00" in message


def test_cpu_entry_cannot_use_nvlink_and_unused_parallel_degree_is_an_error():
    text = MINIMAL.replace("tensor_parallel: [1]}", "tensor_parallel: [1], interconnect: nvlink}")
    text = text.replace("preserve:", "  parallelism: {tensor: [1, 2]}\npreserve:")
    messages = [m for _, m in problems_of(text)]
    assert any("cannot use interconnect 'nvlink'" in m for m in messages)
    assert any("tensor degree 2 appears in no hardware entry" in m for m in messages)


def test_semantic_rules_still_run_for_sections_without_schema_errors():
    text = MINIMAL.replace("title: Tiny optimisation", "title: 5").replace(
        "preserve:", "  batch: {min: 9, max: 2}\npreserve:"
    )
    messages = [m for _, m in problems_of(text)]
    assert any("is not of type 'string'" in m for m in messages)
    assert any("batch min 9 is greater than max 2" in m for m in messages)


def test_render_command_replaces_only_known_tokens():
    point = ScopePoint.of({"tensor_parallel": 2, "draft_length": 7})
    command = ["srv", "--port", "{port}", "--tp", "{tensor_parallel}", '{"n": {draft_length}}', "{other}"]
    assert render_command(command, port=8123, point=point) == [
        "srv",
        "--port",
        "8123",
        "--tp",
        "2",
        '{"n": 7}',
        "{other}",
    ]
    with pytest.raises(ValueError, match="batch"):
        render_command(["{batch}"], port=1, point=point)


def test_a_context_that_no_check_compares_to_its_end_is_a_warning():
    text = MINIMAL.replace("preserve:", "  context: {max_tokens: 4096, buckets: [1024, 4096]}\npreserve:")
    text += "evals:\n  - {id: e, task: t, metric: m, margin: 0.05, alpha: 0.05}\n"
    short = text + "divergence: {prompts_from: e, buckets: [0, 512, 1024]}\n"
    assert problems_of(short) == []  # the full-context probe teacher-forces every position to 4096
    disabled = short + "features: {full_context: {enabled: false}}\n"
    [(severity, message)] = problems_of(disabled)
    assert severity == "warning" and "positions 1024-4096 of the declared context" in message
    reaching = disabled.replace("buckets: [0, 512, 1024]}", "buckets: [0, 2048, 4096]}")
    assert problems_of(reaching) == []


def test_a_single_valued_engine_dimension_no_command_uses_is_a_warning():
    """The servers are never told a one-valued engine dimension that no command uses, yet every
    point says it: validate warns (several values unused is an error already) (#36 item 12)."""
    text = (FIXTURES / "valid/engine-dimensions.yaml").read_text()
    assert [p for p in problems_of(text) if p[0] == "error"] == []
    assert not any("has the one value" in message for _, message in problems_of(text))  # all used
    unused = text.replace(', --attention-backend, "{attention_backend}"', "")
    [(severity, message)] = [p for p in problems_of(unused) if "attention_backend" in p[1]]
    assert severity == "warning"
    assert message.startswith("scope engine dimension 'attention_backend' has the one value 'FLASHINFER_MLA', but")
    assert "neither command uses {attention_backend}" in message
    used_in_env = unused.replace(
        "    candidate:\n", '    candidate:\n      env: {ATTENTION: "{attention_backend}"}\n', 1
    )
    assert not any("attention_backend" in message for _, message in problems_of(used_in_env))


def test_a_single_valued_engine_dimension_the_vllm_servers_never_use_is_a_warning():
    text = (FIXTURES / "valid/benchmark-engine-args.yaml").read_text()
    assert "engine:" not in text.split("preserve:")[0]
    scoped = text.replace("preserve:", "  engine: {kv_cache_dtype: [fp8]}\npreserve:", 1)
    found = [p for p in problems_of(scoped) if "kv_cache_dtype" in p[1]]
    assert found and found[0][0] == "warning" and "the servers never use {kv_cache_dtype}" in found[0][1]
