"""The probes, the speculative check and the benchmark rule against the REAL example engine
(examples/mini-k3, a tiny random-weight mini-K3 so no trained weights are needed): the clean
candidate passes every probe, and each planted fault fails the right check with a precise reason.

Faults are planted the way real bugs look from outside: a wrapper that drops the temperature or
the JSON schema, a crash near the maximum context, a speculative verifier that accepts a wrong
token at draft length 7, a decode path that is slower at batch 64.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mini-k3"
pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")
mini_engine = pytest.importorskip("mini_k3.engine")

from fasttrack.evidence import Status
from fasttrack.kinds.benchmarks import census, decide, speed, timing
from fasttrack.kinds.speculative.run import check_draft_length
from fasttrack.probes.adapters import InProcessProbeTarget
from fasttrack.probes.full_context import FullContextSettings, probe_full_context
from fasttrack.probes.logprobs import LogprobSettings, probe_logprobs
from fasttrack.probes.n_samples import NSettings, probe_n_samples
from fasttrack.probes.stop_strings import StopSettings, probe_stop_strings
from fasttrack.probes.structured_output import StructuredSettings, probe_structured_output
from fasttrack.probes.temperature import TemperatureSettings, probe_temperature
from mini_k3.config import MiniK3Config
from mini_k3.fasttrack_target import MiniK3Target
from mini_k3.model import MiniK3
from mini_k3.tokenizer import ByteTokenizer
from support.paths import TESTS

MAX_CONTEXT = 256


@pytest.fixture(autouse=True, scope="module")
def single_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def engine(draft: int = 0):
    torch.manual_seed(0)
    model = MiniK3(MiniK3Config.tiny())
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(4.0)  # peaked, input-dependent distributions
    return mini_engine.Engine(
        model=model.eval(), tokenizer=ByteTokenizer(), max_model_len=MAX_CONTEXT, speculative_draft_tokens=draft
    )


class Planted(MiniK3Target):
    """The example target with one bug planted in front of the engine."""

    def __init__(self, eng, fault: str | None = None):
        super().__init__(eng)
        self.fault = fault

    def generate(self, requests):
        requests = [dict(r) for r in requests]
        for r in requests:
            if self.fault == "temperature_ignored" and r.get("temperature", 1.0) > 0:
                r["temperature"] = 1.0
            if self.fault == "grammar_skipped":
                r.pop("json_schema", None)
            if self.fault == "crash_at_max_context" and len(r["prompt"]) + r["max_tokens"] > 0.9 * MAX_CONTEXT:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
        started = time.perf_counter()
        results = super().generate(requests)
        if self.fault == "slow_at_batch_64" and len(requests) >= 64:
            # Twice its own time plus 40 ms a decode step: relative, so a busy host slows both
            # sides alike and the planted slowdown stays visible beside other jobs.
            time.sleep(time.perf_counter() - started + 0.04 * (max(r["max_tokens"] for r in requests) - 1))
        return results


def sides(fault=None, draft=0):
    return (
        InProcessProbeTarget(MiniK3Target(engine()), "baseline"),
        InProcessProbeTarget(Planted(engine(draft), fault), "candidate"),
    )


def test_clean_example_candidate_passes_every_probe():
    base, cand = sides()
    checks = [
        probe_full_context(base, cand, FullContextSettings(max_context=MAX_CONTEXT, buckets=(0, 64, 128, 192, 256))),
        probe_temperature(
            base,
            cand,
            TemperatureSettings.from_mapping({"temperatures": [0.5, 1.5], "top_p": [1.0, 0.9], "samples": 500}),
        ),
        probe_structured_output(base, cand, StructuredSettings.from_mapping({"samples": 1})),
        probe_stop_strings(base, cand, StopSettings.from_mapping({})),
        probe_n_samples(base, cand, NSettings.from_mapping({})),
        probe_logprobs(base, cand, LogprobSettings.from_mapping({})),
    ]
    for result in checks:
        assert result.passed, (result.probe, result.reason)


@pytest.mark.parametrize(
    "fault, probe, words",
    [
        ("temperature_ignored", "temperature", "do not follow the baseline's softmax(logits/T) at T=0.5"),
        ("grammar_skipped", "structured", "violates the schema"),
        ("crash_at_max_context", "full_context", "illegal memory access"),
    ],
)
def test_planted_fault_fails_its_probe_on_the_example(fault, probe, words):
    base, cand = sides(fault)
    run = {
        "temperature": lambda: probe_temperature(
            base, cand, TemperatureSettings.from_mapping({"temperatures": [0.5], "top_p": [1.0], "samples": 500})
        ),
        "structured": lambda: probe_structured_output(base, cand, StructuredSettings.from_mapping({"samples": 0})),
        "full_context": lambda: probe_full_context(base, cand, FullContextSettings(max_context=MAX_CONTEXT)),
    }[probe]
    result = run()
    assert result.status == "failed" and words in result.reason


def test_flat_distributions_make_the_temperature_probe_underpowered_not_passed():
    # the tiny random model's next-token distributions are nearly uniform: 300 samples at T=0.7
    # cannot tell an ignored temperature apart, and the probe says so instead of passing
    base, cand = sides("temperature_ignored")
    result = probe_temperature(
        base, cand, TemperatureSettings.from_mapping({"temperatures": [0.7], "top_p": [1.0], "samples": 300})
    )
    assert result.status in ("not_run", "failed")
    if result.status == "not_run":
        assert result.reason_code == "underpowered" and "probability" in result.reason


def test_speculative_wrong_token_at_draft_7_is_caught(monkeypatch):
    prompts = ["abc abc abc abc abc abc abc abc", "red green blue red green blue red green"]
    reference = InProcessProbeTarget(MiniK3Target(engine()))
    clean = check_draft_length(
        reference, InProcessProbeTarget(MiniK3Target(engine(7))), 7, None, prompts, max_tokens=40
    )
    assert clean.status == "passed" and clean.measurements["drafts"] > 0

    real_accept = mini_engine.accept_draft

    def accept_wrong_at_7(draft, probs, generator):
        emitted = real_accept(draft, probs, generator)
        if len(draft) == 7 and len(emitted) <= len(draft) and emitted[-1] != draft[len(emitted) - 1]:
            emitted[-1] = int(draft[len(emitted) - 1])  # keep the rejected draft token: a wrong token
        return emitted

    monkeypatch.setattr(mini_engine, "accept_draft", accept_wrong_at_7)
    result = check_draft_length(
        reference, InProcessProbeTarget(MiniK3Target(engine(7))), 7, None, prompts, max_tokens=40
    )
    assert result.status == "failed" and "at draft length 7 greedy output differs" in result.reason


def test_slowdown_at_batch_64_fails_the_benchmark_rule_on_the_example():
    base, cand = sides("slow_at_batch_64")
    prompts = timing.synthetic_prompts(base, 64, 8)
    # 14 pairs: the sequential rule (alpha 0.025) then still decides with a pair or two spoiled by a
    # neighbour's burst.
    base_rates, cand_rates = timing.alternate(
        lambda: timing.decode_rate(base, prompts, 12), lambda: timing.decode_rate(cand, prompts, 12), 14
    )
    seq = speed.sequential(decide.pair_ratios(base_rates, cand_rates), 0.95, 0.025)
    decision = decide.within_margin(seq, 0.05, 0.025, 14, None)
    assert decision.status is Status.FAILED and "slower than stock by more than" in (decision.reason or "")


def test_probes_over_http_against_the_example_server():
    from fastapi.testclient import TestClient

    from fasttrack.probes.adapters import OpenAIProbeTarget
    from mini_k3.server import create_app

    with TestClient(create_app(engine())) as stock, TestClient(create_app(engine())) as optimised:
        base = OpenAIProbeTarget("http://testserver", "baseline", client=stock, max_context=MAX_CONTEXT)
        cand = OpenAIProbeTarget("http://testserver", "candidate", client=optimised, max_context=MAX_CONTEXT)
        results = [
            probe_stop_strings(base, cand, StopSettings.from_mapping({})),
            probe_n_samples(base, cand, NSettings.from_mapping({})),
            probe_logprobs(base, cand, LogprobSettings.from_mapping({})),
            probe_structured_output(base, cand, StructuredSettings.from_mapping({"samples": 1})),
        ]
        for result in results:
            assert result.passed, (result.probe, result.reason)
        # top-k only over HTTP: the temperature probe falls back to its two-sample test
        temperature = probe_temperature(
            base,
            cand,
            TemperatureSettings.from_mapping({"temperatures": [0.5], "top_p": [1.0], "samples": 400, "positions": 1}),
        )
        assert temperature.status != "failed", temperature.reason
        assert "two-sample" in temperature.details["method"]
        # full context over HTTP: echoed top-k prompt logprobs (the flat random model leaves the
        # lumped-KL bound loose, so the probe may only say "underpowered", never pass wrongly)
        tops = base.prompt_top_logprobs(base.tokenize("hello world"), 5)
        assert tops[0] is None and len(tops) == len("hello world") and all(len(t) >= 5 for t in tops[1:])
        full = probe_full_context(base, cand, FullContextSettings(max_context=MAX_CONTEXT))
        assert full.status in ("passed", "not_run") and full.details["method"].startswith("top-20 lumped KL")


def test_kernel_census_of_the_example_engine():
    base, _ = sides()
    prompts = timing.synthetic_prompts(base, 2, 8)
    found = census.kernel_census(base, prompts, steps=3)
    assert found["device"] == "cpu" and found["counted"] == "top-level aten ops"
    assert found["kernels_per_step"] > 10 and found["us_per_step"] > 0
    assert found["layers"] == 2 and found["layers_source"] == "record_function"  # hooks on model.layers
    assert (
        0 < found["kernels_per_layer"] * 2 < found["kernels_per_step"]
    )  # embedding, head, sampling are outside layers


def test_runners_start_and_stop_the_example_servers(tmp_path):
    """target.kind openai with commands: the runners start both servers (speculative_args at a
    draft length), probe them over HTTP, read /metrics for the acceptance length, and stop them."""
    from safetensors.torch import save_file

    from fasttrack.kinds.context import RunContext
    from fasttrack.kinds.features import run as features
    from fasttrack.kinds.speculative import run as speculative
    from fasttrack.manifest import ScopePoint, load_manifest
    from fasttrack.plan import CheckInstance

    weights = tmp_path / "weights"
    weights.mkdir()
    model = engine().model
    model.config.save(weights / "config.json")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(weights / "model.safetensors"))
    command = f"[{sys.executable}, -m, mini_k3.server, --model, {weights}, --max-model-len, '{MAX_CONTEXT}', --threads, '1', --port, '{{port}}'"
    manifest_text = (
        (TESTS / "unit" / "probes" / "fake_manifest.yaml")
        .read_text()
        .replace(
            """target:
  kind: python
  python:
    factory: "fasttrack.probes.fake:create"
    options: {faults: [], step_delay_s: 0.005}""",
            f"""target:
  kind: openai
  openai:
    baseline: {{command: {command}], cwd: {EXAMPLE}}}
    candidate: {{command: {command}], cwd: {EXAMPLE}}}
    speculative_args: [--speculative-draft-tokens, "{{draft_length}}"]
    startup_timeout_s: 120""",
        )
    )
    # Both servers run the stock path (these probes compare like with like): a server target's switch
    # needs a server flag or an environment variable and a counter; this variable changes nothing.
    manifest_text = manifest_text.replace(
        "  enable: {engine_arg: latency_specialized}",
        "  enable: {env: FASTTRACK_TEST_UNUSED_SWITCH=1}\n"
        "  proof: {source: metrics, metric: minik3_decode_steps_total, label: path}",
    )
    (tmp_path / "fasttrack.yaml").write_text(manifest_text)
    manifest = load_manifest(tmp_path / "fasttrack.yaml")
    context = RunContext(manifest, None, tmp_path, tmp_path / "artifacts", 300.0)

    point = ScopePoint.of({"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1})
    stop = features.run(
        CheckInstance(
            "features/stop_strings",
            "features",
            "stop_strings",
            point,
            True,
            True,
            None,
            None,
            None,
            1.0,
            300.0,
            {"name": "stop_strings"},
        ),
        context,
    )
    assert stop.status is Status.PASSED, stop.reason

    spec_point = ScopePoint.of({**point.as_dict(), "draft_length": 4})
    config = {
        "method": "ngram",
        "draft_lengths": [4],
        "min_acceptance_length": 1.0,
        "prompts": ["abc abc abc abc abc abc abc abc", "red green blue red green blue red green"],
    }
    spec = speculative.run(
        CheckInstance(
            "speculative/ngram", "speculative", "ngram", spec_point, True, True, None, None, None, 1.0, 300.0, config
        ),
        context,
    )
    assert spec.status is Status.PASSED, spec.reason
    assert spec.measurements["drafts"] > 0 and spec.measurements["acceptance_length"] >= 1.0
    assert list((tmp_path / "artifacts").glob("server-*.log"))  # server logs kept as artifacts
