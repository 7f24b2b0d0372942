"""The census of a GPU trace counts the kernels each decode step launched (through the launch
calls' correlation ids, CUDA graphs included) and the streams they ran on, not CPU operators;
``min_streams_per_step`` proves work moved to a second stream (#36 item 2: vllm#45452's
two-stream switches need no counter). The traces are built in Kineto's shape: launch calls on the
CPU timeline (``cuda_runtime``), kernels on their stream's (``kernel``), one ``correlation``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fasttrack.kinds.benchmarks.census import census_problems
from fasttrack.manifest.sections import CensusRule
from fasttrack.targets.gpu_trace import Launches
from fasttrack.targets.profiler import census_of, decode_steps, read_trace

STEP = "execute_context_0(0)_generation_{b}({b})"


class Trace:
    """A trace being written: steps, the CPU operators and launches inside them, their kernels."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.correlation = 0

    def step(self, ts: float, dur: float, batch: int = 1) -> None:
        self.events.append({"cat": "user_annotation", "name": STEP.format(b=batch), "ts": ts, "dur": dur})

    def cpu_op(self, ts: float, name: str = "aten::mm") -> None:
        self.events.append({"cat": "cpu_op", "name": name, "ts": ts, "dur": 1.0, "tid": 1})

    def launch(self, ts: float, kernels: list[tuple[str, int]], call: str = "cudaLaunchKernel") -> None:
        """One launch call at ``ts`` and the kernels it ran (a graph launch runs several), late on the GPU."""
        self.correlation += 1
        args = {"correlation": self.correlation}
        self.events.append({"cat": "cuda_runtime", "name": call, "ts": ts, "dur": 2.0, "args": args})
        for i, (name, stream) in enumerate(kernels):
            kernel_args = {"correlation": self.correlation, "stream": stream}
            self.events.append({"cat": "kernel", "name": name, "ts": ts + 500 + i, "dur": 3.0, "args": kernel_args})


def two_steps(streams: tuple[int, int]) -> Trace:
    """Two decode steps: each one eager launch and one CUDA graph of four kernels, the shared
    expert's GEMM on ``streams[1]``; a CPU operator in each step that is no kernel."""
    trace = Trace()
    for lo in (0.0, 100.0):
        trace.step(lo, 50.0)
        trace.cpu_op(lo + 1)
        trace.launch(lo + 2, [("rms_norm_kernel", 7)])
        graph = [("mla_decode", 7), ("moe_gemm", 7), ("shared_expert_gemm", streams[1]), ("all_reduce", 7)]
        trace.launch(lo + 10, graph, call="cudaGraphLaunch")
    trace.launch(300.0, [("sampler", 7)])  # after the steps: in no step
    return trace


def test_a_gpu_step_counts_the_kernels_it_launched_graphs_included_wherever_they_ran():
    steps = decode_steps(two_steps((7, 7)).events, batch=1)
    assert [s.top_ops for s in steps] == [5, 5]  # 1 eager + 4 in the graph; not the CPU operator
    assert steps[0].names["shared_expert_gemm"] == 1 and "aten::mm" not in steps[0].names
    assert "sampler" not in steps[1].names  # launched after the step
    assert [s.streams for s in steps] == [1, 1]
    census = census_of(steps, n_layers=5)
    assert census["device"] == "cuda" and census["kernels_per_layer"] == 1.0
    assert census["streams_per_step"] == 1.0 and census["counted"].startswith("GPU kernels")


def test_a_trace_without_gpu_kernels_counts_cpu_operators_as_before():
    trace = Trace()
    trace.step(0.0, 50.0)
    trace.cpu_op(1.0)
    trace.cpu_op(5.0, "aten::add")
    assert Launches.of(trace.events) is None
    census = census_of(decode_steps(trace.events, batch=1), n_layers=None)
    assert census["device"] == "cpu" and census["kernels_per_step"] == 2 and census["streams_per_step"] is None


def test_min_streams_per_step_passes_a_second_stream_on_the_candidate_only():
    rule = CensusRule(min_streams_per_step=2)
    stock = census_of(decode_steps(two_steps((7, 7)).events, batch=1), 5)
    two = census_of(decode_steps(two_steps((7, 13)).events, batch=1), 5)
    assert two["streams_per_step"] == 2.0
    assert census_problems(stock, two, rule) == []
    # a candidate that fell back to one stream: the same census as stock, and too few streams
    assert any("1 CUDA stream(s), fewer than 2" in p for p in census_problems(stock, stock, rule))
    # stock on two streams already: a second stream on the candidate proves nothing about the switch
    assert any("already runs on 2 CUDA streams" in p for p in census_problems(two, two, rule))


def test_min_streams_per_step_on_a_cpu_census_is_never_shown():
    trace = Trace()
    trace.step(0.0, 50.0)
    trace.cpu_op(1.0)
    cpu = census_of(decode_steps(trace.events, batch=1), None)
    other = {**cpu, "kernels_per_step": 3.0}
    problems = census_problems(cpu, other, CensusRule(min_streams_per_step=2))
    assert any("needs a GPU census" in p for p in problems)


REAL = Path(__file__).resolve().parents[2] / "fixtures" / "profiler" / "h100_graph_two_streams.pt.trace.json.gz"


def test_a_real_cuda_trace_attributes_graph_kernels_and_shows_the_second_stream():
    """scripts/device/gpu_trace_probe.py on an NVIDIA H100 (torch 2.11.0+cu130): two steps, each an
    eager tanh, a CUDA graph replay (matmul as two cuBLAS kernels, relu, add) and an add; the second
    also a multiply on a second stream. The graph's kernels carry its launch's correlation id."""
    steps = decode_steps(read_trace(REAL), batch=1)
    assert [s.top_ops for s in steps] == [6, 8]
    assert [s.streams for s in steps] == [1, 2]
    graph = [n for n in steps[0].names if "gemm" in n]
    assert len(graph) == 2  # the replayed graph's cuBLAS kernels, launched by one cudaGraphLaunch
    assert any("MulFunctor" in n for n in steps[1].names) and not any("MulFunctor" in n for n in steps[0].names)
