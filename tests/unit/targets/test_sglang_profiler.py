"""The census of an SGLang side from SGLang's torch profiler (`fasttrack.targets.sglang.profiler`):
its decode-step spans, the side's profiler from its environment, and a trace without step spans
(an SGLang that does not mark its forward steps) as a census that is unavailable, never empty."""

from __future__ import annotations

from pathlib import Path

import pytest

from fasttrack.targets.profiler import census_of, decode_steps
from fasttrack.targets.protocol import CensusUnavailable
from fasttrack.targets.sglang.profiler import SGLANG_DECODE_STEP, SglangProfiler, sglang_profiler


def span(name: str, ts: float, dur: float, cat: str = "user_annotation") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def test_sglangs_decode_step_spans_give_the_batch():
    assert SGLANG_DECODE_STEP.fullmatch("step[DECODE bs=4]").group(1) == "4"  # type: ignore[union-attr]
    assert SGLANG_DECODE_STEP.fullmatch("step[DECODE bs=4 c=0 g=4 g_sk=512]")  # roofline terms
    assert SGLANG_DECODE_STEP.fullmatch("step[EXTEND bs=4 toks=32]") is None
    events = [
        span("step[EXTEND bs=2 toks=16]", 0, 10),
        span("aten::mm", 1, 2, "cpu_op"),
        span("step[DECODE bs=2]", 20, 10),
        span("aiter::biased_grouped_topk", 21, 2, "cpu_op"),
        span("aten::mm", 24, 2, "cpu_op"),
    ]
    [step] = decode_steps(events, 2, SGLANG_DECODE_STEP)
    assert dict(step.names) == {"aiter::biased_grouped_topk": 1, "aten::mm": 1}
    assert decode_steps(events, 2) == []  # vLLM's annotation is not SGLang's


def test_the_side_profiles_only_where_its_environment_names_the_dir(tmp_path):
    env = {"SGLANG_TORCH_PROFILER_DIR": "{server_dir}/traces"}
    made = sglang_profiler(env, ["python", "-m", "sglang.launch_server"], "http://h:1", server_dir=tmp_path)
    assert isinstance(made, SglangProfiler) and made.trace_dir == tmp_path / "traces"
    assert made._start_body()["output_dir"] == str(tmp_path / "traces")  # SGLang's field, the same folder
    relative = sglang_profiler({"SGLANG_TORCH_PROFILER_DIR": "traces"}, [], "http://h:1", cwd=tmp_path)
    assert relative is not None and relative.trace_dir == tmp_path / "traces"
    assert sglang_profiler({}, [], "http://h:1") is None


def test_a_trace_without_decode_step_spans_is_an_unavailable_census(tmp_path):
    profiler = SglangProfiler("http://h:1", tmp_path)
    with pytest.raises(CensusUnavailable, match=r"no 'step\[DECODE bs=4\]' span"):
        profiler._no_step(Path("1.0-TP-0.trace.json.gz"), 4)


def launch(name: str, ts: float, correlation: int, cat: str = "cuda_runtime") -> dict:
    return {**span(name, ts, 1, cat), "args": {"correlation": correlation}}


def test_the_device_kernels_of_a_replayed_graph_count_in_the_step_that_launched_them(tmp_path):
    events = [
        span("step[DECODE bs=2]", 20, 10),
        span("aten::copy_", 21, 1, "cpu_op"),
        launch("hipGraphLaunch", 23, 7),  # one host call, every kernel of the graph
        launch("route_radix4_topk_kernel<16, 896>", 40, 7, "kernel"),  # runs later, on the device
        launch("fused_moe_kernel", 45, 7, "kernel"),
        span("step[DECODE bs=2]", 60, 10),
        launch("hipGraphLaunch", 61, 9),
        span("aten::copy_", 62, 1, "cpu_op"),
        launch("route_radix4_topk_kernel<16, 896>", 75, 9, "kernel"),
        launch("fused_moe_kernel", 76, 9, "kernel"),
        launch("hipLaunchKernel", 90, 8),  # outside every step: not counted
        launch("biased_grouped_topk_kernel", 91, 8, "kernel"),
    ]
    steps = decode_steps(events, 2, SGLANG_DECODE_STEP)
    census = census_of(steps, None, "SGLang")
    # on a GPU trace the step's kernels are counted, not its host operators
    assert census["kernel_names"] == {"route_radix4_topk_kernel<16, 896>": 1, "fused_moe_kernel": 1}
    assert census["kernels_per_step"] == 2 and census["device"] == "cuda"
    assert census["counted"] == "GPU kernels launched in the step (SGLang torch profiler)"
    # a trace without device kernels (a CPU run) is counted by its operators alone
    cpu_events = [e for e in events if e["cat"] in ("user_annotation", "cpu_op")]
    plain = census_of(decode_steps(cpu_events, 2, SGLANG_DECODE_STEP), None, "SGLang")
    assert plain["kernel_names"] == {"aten::copy_": 1} and plain["device"] == "cpu"
