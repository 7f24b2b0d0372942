"""The census of an SGLang side from SGLang's torch profiler (`fasttrack.targets.sglang.profiler`):
its decode-step spans, the side's profiler from its environment, and a trace without step spans
(an SGLang that does not mark its forward steps) as a census that is unavailable, never empty."""

from __future__ import annotations

from pathlib import Path

import pytest

from fasttrack.targets.profiler import decode_steps
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
