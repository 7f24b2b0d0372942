"""The sglang_bench workload: `python -m sglang.bench_serving`'s command line, its result line (a
recorded one in SGLang's field names), and the whole benchmark against two fake SGLang servers
(an `sglang` target) with a fake `sglang` package on PYTHONPATH (no SGLang is installed here)."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from fasttrack.environment import Environment
from fasttrack.kinds.benchmarks.run import run as run_benchmark
from fasttrack.kinds.benchmarks.serving_bench import read_result
from fasttrack.kinds.benchmarks.sglang_bench import bench_command, read_line
from fasttrack.kinds.benchmarks.speed import sequential
from fasttrack.kinds.context import RunContext
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import check_text, load_manifest
from fasttrack.plan import build_plan

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sglang_bench"
RESULT = FIXTURES / "result-c4.jsonl"
FAKE = FIXTURES / "fake"
CPU = Environment("cpu", (), "test", "loopback", "cpu", 2, "Linux", "3.11")


def test_a_recorded_line_is_read_in_sglangs_field_names(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("not the last line\n" + RESULT.read_text())  # the client appends: the last line counts
    data = read_line(path)
    rep = read_result(data, num_prompts=16)
    assert rep.problems == ()
    values = rep.values
    assert (values["median_tpot_ms"], values["output_throughput"], values["p99_itl_ms"]) == (14.12, 253.7417, 22.67)
    assert values["median_e2e_latency_ms"] == 2001.77 and values["request_throughput"] == 1.9824
    assert "accept_length" not in values  # null without speculative decoding: not a number
    assert "request_rate" not in data  # an argument (Infinity by default), not a result


def test_an_incomplete_run_is_named():
    data = read_line(RESULT)
    assert read_result({**data, "completed": 15}, 16).problems == ("completed 15 of 16 prompts",)
    # read as a result, SGLang's default request rate would be a non-finite number
    assert "request_rate is inf" in read_result(json.loads(RESULT.read_text()), 16).problems


def test_the_command_line_is_sglangs(tmp_path):
    workload = {"input_len": 1024, "output_len": 128, "num_prompts": 16, "args": {"dataset_path": "/d.json"}}
    command = bench_command(workload, "http://127.0.0.1:9", "m", 4, tmp_path, "r.jsonl", seed=1)
    assert command[:3] == ["python", "-m", "sglang.bench_serving"]
    text = " ".join(command)
    for part in (
        "--backend sglang",
        "--base-url http://127.0.0.1:9",
        "--model m",
        "--dataset-name random",
        "--num-prompts 16",
        "--max-concurrency 4",
        "--seed 1",
        f"--output-file {tmp_path / 'r.jsonl'}",
        "--warmup-requests 4",
        "--random-input-len 1024",
        "--random-output-len 128",
        "--random-range-ratio 1",
        "--dataset-path /d.json",
    ):
        assert part in text, part
    own = {**workload, "backend": "sglang-oai", "args": {"warmup_requests": 8}}
    text = " ".join(bench_command(own, "u", "m", 4, tmp_path, "r.jsonl", seed=1))
    assert "--backend sglang-oai" in text and "--warmup-requests 8" in text and "--warmup-requests 4" not in text


MANIFEST = """\
fasttrack: 1
optimisation: {{id: bench, title: sglang bench}}
model: {{id: org/m, code_paths: ["m/**"]}}
switch:
  name: fast
  default: false
  enable: {{env: FAKE_FAST=1}}
  proof: {{source: metrics, metric: "sglang:fake_steps_total", label: path}}
scope:
  hardware: [{{accelerator: cpu, device_counts: [1], tensor_parallel: [1]}}]
preserve: {{full_context: true, temperature_sampling: true, structured_output: true}}
target:
  kind: sglang
  sglang:
    model_path: ckpt
    served_model_name: m
    server_args: [--enable-metrics]
    startup_timeout_s: 60
benchmarks:
  - id: decode
    metric: {metric}
    workload: {{kind: sglang_bench, input_len: 1024, output_len: 128, num_prompts: 16, max_concurrency: [1, 4], repetitions: 3}}
"""


def setup(tmp_path: Path, monkeypatch, metric: str = "median_tpot_ms"):
    monkeypatch.syspath_prepend(str(FAKE))  # find_spec("sglang") here, as the plan asks
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE), os.environ.get("PYTHONPATH", "")]))
    path = tmp_path / "fasttrack.yaml"
    path.write_text(MANIFEST.format(metric=metric))
    m = load_manifest(path)
    [instance] = [i for i in build_plan(m, CPU, KINDS).instances if i.kind == "benchmarks"]
    assert instance.runnable, instance.reason
    out = tmp_path / "out"
    context = RunContext(m, CPU, out, out / "artifacts" / "bench", 300.0)
    context.artifact_dir.mkdir(parents=True)
    return instance, context


def test_one_outcome_per_concurrency_with_the_paired_comparison(tmp_path, monkeypatch):
    instance, context = setup(tmp_path, monkeypatch)
    outcomes = run_benchmark(instance, context)
    assert [o.id.split("#")[1] for o in outcomes] == ["concurrency=1", "concurrency=4"]
    decided = sequential([1.25] * 20, 0.95, 0.025, bounds=False).decided_at
    for o in outcomes:
        assert o.status.value == "passed", o.reason
        m = o.measurements
        assert m["tool"] == "python -m sglang.bench_serving"
        assert len(m["candidate"]["runs"]) == len(m["baseline"]["runs"]) == m["pairs"] == decided
        assert m["ratio"] == pytest.approx(1.25)  # median_tpot_ms: lower is better, the candidate 20 % less
        assert m["candidate"]["median"]["median_tpot_ms"] == pytest.approx(14.12 * 0.8 * (1 + 0.01 * (decided // 2)))
        assert m["baseline"]["median"]["output_throughput"] == 253.7417
    logs = sorted(p.name for p in context.artifact_dir.glob("sglang-bench-*.log"))
    assert "sglang-bench-baseline-c1-warmup.jsonl.log" in logs and "sglang-bench-candidate-c4-p1.jsonl.log" in logs
    # each side's server was SGLang's launch command, and its build SGLang's /get_server_info version
    log = (context.artifact_dir / "server-candidate.log").read_text()
    assert "fake sglang 0.5.2 serving m" in log and "fast=True" in log
    build = json.loads((context.artifact_dir / "engine-build.baseline.json").read_text())
    assert build["version"] == "0.5.2" and build["source"].endswith("/get_server_info")


def test_an_incomplete_candidate_run_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_SGLANG_BREAK", "1")
    instance, context = setup(tmp_path, monkeypatch)
    outcomes = run_benchmark(instance, context)
    assert all(o.status.value == "failed" and o.reason_code == "crashed" for o in outcomes)
    assert "completed 15 of 16 prompts" in outcomes[0].reason


def test_a_field_sglang_did_not_report_errors_the_comparison(tmp_path, monkeypatch):
    instance, context = setup(tmp_path, monkeypatch, metric="accept_length")
    outcomes = run_benchmark(instance, context)
    assert all(o.status.value == "errored" for o in outcomes)
    assert "gave no usable 'accept_length'" in outcomes[0].reason and "drafts" in outcomes[0].reason


def test_without_sglang_it_is_not_run(tmp_path, monkeypatch):
    instance, context = setup(tmp_path, monkeypatch)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(FAKE)])
    sys.modules.pop("sglang", None)
    outcomes = run_benchmark(instance, context)
    assert {o.status.value for o in outcomes} == {"not_run"} and {o.reason_code for o in outcomes} == {"dependency"}
    assert "needs SGLang" in outcomes[0].reason
    plan = build_plan(context.manifest, CPU, KINDS)
    bench = next(i for i in plan.instances if i.kind == "benchmarks")
    assert bench.reason_code == "target" and "SGLang is not installed here" in bench.reason


def errors(text: str) -> list[str]:
    return [p.message for p in check_text(textwrap.dedent(text))[1] if p.severity == "error"]


def test_the_workloads_rules():
    base = MANIFEST.format(metric="median_tpot_ms")
    assert errors(base) == []
    found = errors(base.replace("repetitions: 3}", "repetitions: 3, args: {output_file: x, random_range_ratio: 0.5}}"))
    assert sum("fasttrack sets it for each run" in e for e in found) == 2
    found = errors(base.replace("metric: median_tpot_ms", "metric: median_e2el_ms"))
    assert any("a field of SGLang's result line" in e for e in found)  # vLLM's spelling, not SGLang's
    python = base.split("target:\n")[0] + "target:\n  kind: python\n  python: {factory: 'a:b'}\nbenchmarks:"
    python += base.split("benchmarks:")[1]
    assert any("needs target.kind openai or sglang" in e for e in errors(python))
