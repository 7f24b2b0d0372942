"""The vllm_bench workload: `vllm bench serve`'s command line, its result JSON (a recorded one in
vLLM's field names), repetitions and their median, absolute bounds on every raw repetition, and
the whole benchmark against two fake servers with a fake `vllm` executable on PATH."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from fasttrack.environment import Environment
from fasttrack.kinds.benchmarks.run import run as run_benchmark
from fasttrack.kinds.benchmarks.speed import sequential
from fasttrack.kinds.benchmarks.vllm_bench import (
    Repetition,
    bench_command,
    bound_violations,
    extra_args,
    median_fields,
    read_result,
)
from fasttrack.kinds.context import RunContext
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.plan import build_plan
from support.paths import SUPPORT

RESULT = Path(__file__).resolve().parents[2] / "fixtures" / "vllm_bench" / "result-c4.json"
CPU = Environment("cpu", (), "test", "loopback", "cpu", 2, "Linux", "3.11")


def test_a_recorded_result_is_read_in_vllms_field_names():
    rep = read_result(json.loads(RESULT.read_text()), num_prompts=16)
    assert rep.problems == ()
    assert (rep.values["median_tpot_ms"], rep.values["output_throughput"], rep.values["p99_ttft_ms"]) == (
        14.12,
        253.7417,
        139.88,
    )
    assert "latencies" not in rep.values and "request_goodput" not in rep.values  # lists and nulls are not numbers


def test_incomplete_or_broken_repetitions_are_named():
    data = json.loads(RESULT.read_text())
    assert read_result({**data, "completed": 15, "failed": 1}, 16).problems == (
        "completed 15 of 16 prompts",
        "1 request(s) failed",
    )
    assert read_result({**data, "median_tpot_ms": float("nan")}, 16).problems == ("median_tpot_ms is nan",)
    assert "no 'completed' count" in read_result({"median_tpot_ms": 1.0}, 16).problems[0]


def test_the_median_of_every_field_and_bounds_on_every_raw_repetition():
    reps = [Repetition({"median_tpot_ms": v, "output_throughput": 1000 / v}, ()) for v in (10.0, 14.0, 11.0)]
    assert median_fields(reps)["median_tpot_ms"] == 11.0
    # the median meets max 12, but one raw repetition does not: it is reported
    assert bound_violations(reps, {"median_tpot_ms": {"max": 12.0}}) == ["median_tpot_ms 14 > max 12 (repetition 2)"]
    assert bound_violations(reps, {"ttft": {"min": 1}}) == [f"repetition {i} reports no ttft" for i in (1, 2, 3)]


def test_the_command_line_is_vllms(tmp_path):
    workload = {
        "input_len": 1024,
        "output_len": 128,
        "num_prompts": 16,
        "args": {
            "num_warmups": 4,
            "temperature": 0,
            "percentile_metrics": "ttft,tpot,itl,e2el",
            "trust_remote_code": True,
            "profile": False,
        },
    }
    command = bench_command(workload, "http://127.0.0.1:9", "m", 4, tmp_path, "r.json", seed=1)
    assert command[:3] == ["vllm", "bench", "serve"]
    text = " ".join(command)
    for part in (
        "--backend openai",
        "--base-url http://127.0.0.1:9",
        "--dataset-name random",
        "--num-prompts 16",
        "--max-concurrency 4",
        "--random-input-len 1024",
        "--random-output-len 128",
        "--ignore-eos",
        "--save-result",
        f"--result-dir {tmp_path}",
        "--result-filename r.json",
        "--num-warmups 4",
        "--temperature 0",
        "--percentile-metrics ttft,tpot,itl,e2el",
        "--trust-remote-code",
    ):
        assert part in text, part
    assert "--profile" not in text
    assert extra_args({"extra_body": {"a": 1}, "lora_modules": ["x", "y"]}) == [
        "--extra-body",
        '{"a": 1}',
        "--lora-modules",
        "x",
        "--lora-modules",
        "y",
    ]


FAKE_VLLM = """\
#!{python}
# A stand-in for `vllm bench serve`: asks the server's /version which side it is, answers with the
# recorded result, the candidate 20 % faster (or incomplete, when FAKE_VLLM_BREAK says so).
import json, os, sys, urllib.request
args = sys.argv[1:]
value = lambda flag: args[args.index(flag) + 1]
side = json.load(urllib.request.urlopen(value("--base-url") + "/version"))["version"]
result = json.load(open({result!r}))
scale = 0.8 if side == "candidate" else 1.0
for key in list(result):
    if key.endswith("_tpot_ms") or key.endswith("_itl_ms"):
        result[key] = result[key] * scale * (1 + 0.01 * (int(value("--seed")) % 1000))
result["num_prompts"] = result["completed"] = int(value("--num-prompts"))
result["max_concurrency"] = int(value("--max-concurrency"))
if side == "candidate" and os.environ.get("FAKE_VLLM_BREAK"):
    result["completed"] -= 1
    result["failed"] = 1
json.dump(result, open(os.path.join(value("--result-dir"), value("--result-filename")), "w"))
"""

MANIFEST = """\
fasttrack: 1
optimisation: {{id: bench, title: vllm bench}}
model: {{id: org/m, code_paths: ["m/**"]}}
switch:
  name: fast
  default: false
  enable: {{server_flag: --fast}}
  proof: {{source: metrics, metric: steps_total, label: path}}
scope:
  hardware: [{{accelerator: cpu, device_counts: [1], tensor_parallel: [1]}}]
preserve: {{full_context: true, temperature_sampling: true, structured_output: true}}
target:
  kind: openai
  openai:
    baseline: {{command: [{python}, {server}, --port, "{{port}}", --version, baseline]}}
    candidate: {{command: [{python}, {server}, --port, "{{port}}", --version, candidate, --fast]}}
benchmarks:
  - id: decode
    metric: median_tpot_ms
    workload: {{kind: vllm_bench, input_len: 1024, output_len: 128, num_prompts: 16, max_concurrency: [1, 4], repetitions: 3}}
{assertions}
"""


def setup(tmp_path: Path, monkeypatch, assertions: str = ""):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "vllm"
    fake.write_text(FAKE_VLLM.format(python=sys.executable, result=str(RESULT)))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    path = tmp_path / "fasttrack.yaml"
    path.write_text(
        MANIFEST.format(python=sys.executable, server=SUPPORT / "fake_openai_server.py", assertions=assertions)
    )
    m = load_manifest(path)
    [instance] = [i for i in build_plan(m, CPU, KINDS).instances if i.kind == "benchmarks"]
    assert instance.runnable, instance.reason
    out = tmp_path / "out"
    context = RunContext(m, CPU, out, out / "artifacts" / "bench", 300.0)
    context.artifact_dir.mkdir(parents=True)
    return instance, context


def test_one_outcome_per_concurrency_with_the_median_and_the_paired_comparison(tmp_path, monkeypatch):
    instance, context = setup(tmp_path, monkeypatch)
    outcomes = run_benchmark(instance, context)
    assert [o.id.split("#")[1] for o in outcomes] == ["concurrency=1", "concurrency=4"]
    for o in outcomes:
        assert o.status.value == "passed", o.reason
        m = o.measurements
        # every pair above 1 - margin: the sequential rule decides at the first pair it can (alpha 0.025)
        decided = sequential([1.25] * 20, 0.95, 0.025, bounds=False).decided_at
        assert len(m["candidate"]["runs"]) == len(m["baseline"]["runs"]) == m["pairs"] == decided
        assert (m["rule"], m["margin"], m["family"]) == ("not slower than stock", 0.05, {"points": 2, "alpha": 0.05})
        assert m["ratio"] == pytest.approx(1.25)  # median_tpot_ms: lower is better, the candidate 20 % less
        assert m["ratio_ci"][0] > 0.95
        assert m["candidate"]["median"]["median_tpot_ms"] == pytest.approx(14.12 * 0.8 * (1 + 0.01 * (decided // 2)))
    # one untimed warm-up pair per concurrency, then the timed ones, alternating sides
    logs = sorted(p.name for p in context.artifact_dir.glob("vllm-bench-*.log"))
    assert "vllm-bench-baseline-c1-warmup.json.log" in logs and "vllm-bench-candidate-c4-p1.json.log" in logs


def test_absolute_bounds_fail_a_raw_repetition(tmp_path, monkeypatch):
    bounds = "    assertions: {median_tpot_ms: {max: 11.4}, output_throughput: {min: 100}}"
    instance, context = setup(tmp_path, monkeypatch, bounds)
    outcomes = run_benchmark(instance, context)
    assert all(o.status.value == "failed" and o.reason_code == "regression" for o in outcomes)
    assert "median_tpot_ms 11.4" in outcomes[0].reason and "(repetition 2)" in outcomes[0].reason  # 14.12 x 0.8 x 1.01


def test_an_incomplete_candidate_run_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_BREAK", "1")
    instance, context = setup(tmp_path, monkeypatch)
    outcomes = run_benchmark(instance, context)
    assert all(o.status.value == "failed" and o.reason_code == "crashed" for o in outcomes)
    assert "completed 15 of 16 prompts" in outcomes[0].reason


def test_without_vllm_it_is_not_run(tmp_path, monkeypatch):
    instance, context = setup(tmp_path, monkeypatch)
    monkeypatch.setenv("PATH", "/nonexistent")
    outcomes = run_benchmark(instance, context)
    assert {o.status.value for o in outcomes} == {"not_run"} and {o.reason_code for o in outcomes} == {"dependency"}
    plan = build_plan(context.manifest, CPU, KINDS)
    bench = next(i for i in plan.instances if i.kind == "benchmarks")
    assert bench.reason_code == "dependency" and "vllm is not on PATH" in bench.reason


def test_fixture_manifest_shape(tmp_path):
    text = textwrap.dedent(MANIFEST).format(python=sys.executable, server="s.py", assertions="")
    (tmp_path / "m.yaml").write_text(text.replace("repetitions: 3", "repetitions: 2"))
    with pytest.raises(Exception, match="repetitions must be odd"):
        load_manifest(tmp_path / "m.yaml")


def test_the_load_generator_runs_off_the_timed_servers_cpus():
    import os

    from fasttrack.kinds.benchmarks.vllm_pairs import off_the_timed_cpus

    allowed = os.sched_getaffinity(0)
    one = min(allowed)
    with off_the_timed_cpus((one,)):
        inside = os.sched_getaffinity(0)
    assert os.sched_getaffinity(0) == allowed  # restored after the run
    if len(allowed) > 1:
        assert inside == allowed - {one}
    else:  # nowhere else to go: the client stays where it is
        assert inside == allowed
    with off_the_timed_cpus(()):  # an unpinned server: nothing to avoid
        assert os.sched_getaffinity(0) == allowed
    with off_the_timed_cpus(tuple(allowed)):  # pinned to every CPU: nowhere else either
        assert os.sched_getaffinity(0) == allowed
