"""A real CUDA torch-profiler trace for the GPU kernel census (fasttrack.targets.gpu_trace).

Run on a CUDA machine: ``python scripts/device/gpu_trace_probe.py OUT_DIR``. It profiles two
"decode steps" annotated as vLLM annotates them, each with an eager launch, a CUDA graph replay of
three kernels, and (in the second step only) work on a second stream, and writes the trace
(gzipped) plus what the census reads from it. The trace is the fixture of
tests/unit/targets/test_gpu_trace.py: does a graph's kernels carry its launch's correlation id, and
do the streams show, on a real CUDA build rather than a hand-written trace?"""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

STEP = "execute_context_0(0)_generation_1(1)"


def gpu_trace_module():
    """fasttrack.targets.gpu_trace by path: it needs the standard library only, not fasttrack's deps."""
    path = Path(__file__).resolve().parents[2] / "fasttrack" / "targets" / "gpu_trace.py"
    spec = importlib.util.spec_from_file_location("gpu_trace", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_trace"] = module
    spec.loader.exec_module(module)
    return module


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    x = torch.randn(512, 512, device="cuda")
    side = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    warm = torch.cuda.Stream()
    with torch.cuda.stream(warm):
        for _ in range(3):
            (x @ x).relu_().add_(1)
    torch.cuda.current_stream().wait_stream(warm)
    with torch.cuda.graph(graph):
        graphed = (x @ x).relu_().add_(1)
    torch.cuda.synchronize()

    def step(second_stream: bool) -> torch.Tensor:
        y = torch.tanh(x)  # one eager kernel
        graph.replay()  # three kernels in one launch
        if second_stream:
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                z = x * 2  # the "shared experts" on another stream
            torch.cuda.current_stream().wait_stream(side)
            y = y + z
        return y + graphed

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for second in (False, True):
            with record_function(STEP):
                step(second)
        torch.cuda.synchronize()
    raw = out / "raw.json"
    prof.export_chrome_trace(str(raw))
    trace = json.loads(raw.read_text())
    raw.unlink()
    trace["traceName"] = "cuda_graph_two_streams.pt.trace.json"  # not the machine's path
    with gzip.open(out / "cuda_graph_two_streams.pt.trace.json.gz", "wt", encoding="utf-8") as fh:
        json.dump(trace, fh)
    events = trace["traceEvents"]
    launches = gpu_trace_module().Launches.of(events)
    steps = sorted(
        (e for e in events if e.get("cat") == "user_annotation" and e.get("name") == STEP), key=lambda e: e["ts"]
    )
    found = []
    for s in steps:
        k = launches.launched_between(float(s["ts"]), float(s["ts"]) + float(s["dur"]))
        found.append({"kernels": sum(k.names.values()), "streams": len(k.streams), "names": dict(k.names)})
    summary = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "steps": found}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
