"""The kernel census of a server side from vLLM's torch profiler: operators per decode step.

A vLLM server started with ``--profiler-config '{"profiler": "torch", "torch_profiler_dir": DIR}'``
profiles between ``POST /start_profile`` and ``POST /stop_profile``; its worker then writes a
``*.pt.trace.json.gz`` (Chrome trace format) into DIR. vLLM's model runner marks every step with
a ``user_annotation`` named ``execute_context_<n>(<tokens>)_generation_<m>(<tokens>)``: a decode
step of batch B has no context (prefill) part and B generating requests. Per such step the census
counts the ``cpu_op`` events inside it (ATen, ``_C::`` and ``vllm::`` operators: on a CPU each is
what a launched kernel is on a GPU), top level only (not nested in another operator on the same
thread), and which operators they were. A trace with GPU kernels (a CUDA server) counts the
kernels each step launched instead, and the streams they ran on (`fasttrack.targets.gpu_trace`).

`ServerProfiler` is the server side's `fasttrack.targets.protocol.Profiling`: it profiles one
request for B sampled sequences (``n`` = B, so all B decode together from the first step, with
``min_tokens`` = ``max_tokens``: none finishes early) and returns the census in the shape of the
in-process one (`fasttrack.targets.python.census.Census`), so the benchmarks' census proof judges
both alike. Per layer is the per-step figure divided by the checkpoint's ``num_hidden_layers``
(vLLM's trace has no per-layer ranges), and ``layers_source`` says so.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
import statistics
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn
from urllib.error import URLError
from urllib.request import Request, urlopen

from fasttrack.errors import TargetError
from fasttrack.manifest.profiling import profiler_config_dir
from fasttrack.targets.gpu_trace import Launches

DECODE_STEP = re.compile(r"execute_context_0\(0\)_generation_(\d+)\((\d+)\)")
TRACE_GLOB = "*.pt.trace.json.gz"
# A fixed chat-shaped prompt of byte tokens: the census counts operators, not answers.
PROMPT_TEXT = "write a poem about tapirs"


@dataclass(frozen=True)
class StepCensus:
    """One decode step of a trace: its operators (all, and top level) and its duration; on a GPU
    trace its kernels (`fasttrack.targets.gpu_trace`) and the streams they ran on."""

    all_ops: int
    top_ops: int
    names: Counter[str]  # top-level operator (GPU: kernel) -> count
    us: float
    streams: int | None = None  # distinct CUDA streams of the step's kernels; None on a CPU trace
    start: float = 0.0  # the step's start in the trace (us)


def read_trace(path: Path) -> list[dict[str, Any]]:
    """The trace's events (a `TargetError` when the file is not a complete gzipped JSON trace)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, EOFError, zlib.error, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TargetError(f"cannot read the profiler trace {path}: {exc}") from exc
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if not isinstance(events, list):
        raise TargetError(f"the profiler trace {path} has no traceEvents list")
    return [e for e in events if isinstance(e, dict)]


def decode_steps(
    events: Sequence[Mapping[str, Any]], batch: int, step: re.Pattern[str] = DECODE_STEP
) -> list[StepCensus]:
    """Every decode step of ``batch`` generating requests in the trace, in order (``step``: the
    engine's decode-step annotation, its first group the batch)."""
    steps = sorted(
        (
            e
            for e in events
            if e.get("cat") == "user_annotation" and _decode_batch(str(e.get("name", "")), step) == batch
        ),
        key=lambda e: float(e["ts"]),
    )
    windows = [(float(s["ts"]), float(s["ts"]) + float(s.get("dur", 0.0))) for s in steps]
    launches = Launches.of(events)
    if launches is not None:  # a GPU trace: count the kernels each step launched, not CPU operators
        return [_gpu_step(lo, hi, launches) for lo, hi in windows]
    by_thread: dict[Any, list[tuple[float, float, str]]] = defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op" and "ts" in e and "dur" in e:
            by_thread[e.get("tid")].append((float(e["ts"]), -float(e["dur"]), str(e.get("name"))))
    for ops in by_thread.values():
        ops.sort()  # by start, the enclosing (longer) operator first
    return [_step(lo, hi, by_thread) for lo, hi in windows]


def _gpu_step(lo: float, hi: float, launches: Launches) -> StepCensus:
    kernels = launches.launched_between(lo, hi)
    count = sum(kernels.names.values())
    return StepCensus(count, count, kernels.names, hi - lo, streams=len(kernels.streams), start=lo)


def _decode_batch(name: str, step: re.Pattern[str] = DECODE_STEP) -> int | None:
    match = step.fullmatch(name)
    return int(match.group(1)) if match else None


def _step(lo: float, hi: float, by_thread: Mapping[Any, list[tuple[float, float, str]]]) -> StepCensus:
    names: Counter[str] = Counter()
    all_ops = 0
    for ops in by_thread.values():
        end = float("-inf")  # end of the current top-level operator on this thread
        for start, negative_dur, name in ops[bisect.bisect_left(ops, (lo, float("-inf"), "")) :]:
            if start > hi:
                break
            stop = start - negative_dur
            if stop > hi:
                continue
            all_ops += 1
            if start >= end:
                names[name] += 1
                end = stop
    return StepCensus(all_ops, sum(names.values()), names, hi - lo, start=lo)


def census_of(steps: Sequence[StepCensus], n_layers: int | None, engine: str = "vLLM") -> dict[str, Any]:
    """The decode steps' census in the shape of the in-process one (medians over the steps)."""
    if not steps:
        raise TargetError("the profiler trace holds no decode step of the profiled batch")
    per_step = float(statistics.median(s.top_ops for s in steps))
    us = float(statistics.median(s.us for s in steps))
    total: Counter[str] = Counter()
    for s in steps:
        total.update(s.names)
    gpu = all(s.streams is not None for s in steps)
    return {
        "device": "cuda" if gpu else "cpu",
        "counted": f"GPU kernels launched in the step ({engine} torch profiler)"
        if gpu
        else f"top-level operators ({engine} torch profiler)",
        "streams_per_step": float(statistics.median(s.streams or 0 for s in steps)) if gpu else None,
        "steps": len(steps),
        "kernels_per_step": per_step,
        "us_per_step": us,
        "kernels_per_layer": per_step / n_layers if n_layers else None,
        "us_per_layer": us / n_layers if n_layers else None,
        "layers": n_layers,
        "layers_source": "divided_by_n_layers" if n_layers else None,
        "kernel_names": {k: round(v / len(steps), 3) for k, v in total.most_common()},
        "all_ops_per_step": float(statistics.median(s.all_ops for s in steps)),
    }


def differing_operators(
    baseline: Mapping[str, float], candidate: Mapping[str, float], top: int = 10
) -> list[tuple[str, float, float]]:
    """The operators whose per-step counts differ most between the sides: (name, stock, candidate)."""
    names = set(baseline) | set(candidate)
    rows = [(n, float(baseline.get(n, 0)), float(candidate.get(n, 0))) for n in names]
    rows = [r for r in rows if abs(r[1] - r[2]) > 1e-9]
    rows.sort(key=lambda r: (-abs(r[1] - r[2]), r[0]))
    return rows[:top]


class ServerProfiler:
    """`Profiling` for a server started with vLLM's torch profiler writing into ``trace_dir``
    (the class attributes: what differs for another engine's torch profiler)."""

    ENGINE = "vLLM"
    STEP = DECODE_STEP  # the annotation of a decode step, its first group the batch
    TRACE_GLOB = TRACE_GLOB
    RANK0 = "rank0"  # in the file name of the first rank's trace

    def __init__(
        self,
        base_url: str,
        trace_dir: Path | str,
        *,
        model: str | None = None,
        n_layers: int | None = None,
        timeout_s: float = 300.0,
    ):
        self.base_url = base_url.rstrip("/")
        self.trace_dir = Path(trace_dir)
        self.model = model
        self.n_layers = n_layers
        self.timeout_s = timeout_s
        self.trace_wait_s = timeout_s  # vLLM's worker writes the trace after /stop_profile returns

    def decode_census(self, batch: int, steps: int = 8) -> dict[str, Any]:
        """Profile ``steps`` decode steps at ``batch`` sequences and count their operators."""
        before = set(self.trace_dir.glob(self.TRACE_GLOB)) if self.trace_dir.is_dir() else set()
        clock = time.monotonic()
        self._post("/start_profile", self._start_body())
        try:
            self._post("/v1/completions", self._request(batch, steps + 1))
        finally:
            self._post("/stop_profile", {})
        stopped = time.monotonic()
        trace = self._new_trace(before)
        events = read_trace(trace)
        found = decode_steps(events, batch, self.STEP)
        if not found:
            self._no_step(trace, batch)
        return {
            **census_of(found, self.n_layers, self.ENGINE),
            "source": f"{self.ENGINE.lower()} torch profiler",
            "batch": batch,
            "profile_s": round(stopped - clock, 3),
            "trace_bytes": trace.stat().st_size,
        }

    def _start_body(self) -> dict[str, Any]:
        return {}

    def _no_step(self, trace: Path, batch: int) -> NoReturn:
        raise TargetError(f"{self.base_url}: the profiler trace {trace.name} holds no decode step of batch {batch}")

    def _request(self, batch: int, tokens: int) -> dict[str, Any]:
        prompt = [256, 260, *PROMPT_TEXT.encode(), 262, 261]  # mini-k3-style ids; any valid ids do
        return {
            "model": self.model or self._served_model(),
            "prompt": prompt,
            "n": batch,
            "max_tokens": tokens,
            "min_tokens": tokens,
            "ignore_eos": True,
            "temperature": 1.0,  # sampled: greedy copies of one prompt would be equal anyway
            "seed": 0,
        }

    def _served_model(self) -> str:
        try:
            with urlopen(f"{self.base_url}/v1/models", timeout=30) as r:
                return str(json.loads(r.read())["data"][0]["id"])
        except (OSError, URLError, KeyError, IndexError, ValueError) as exc:
            raise TargetError(f"{self.base_url}/v1/models: cannot read the served model: {exc}") from exc

    def _post(self, path: str, body: Mapping[str, Any]) -> bytes:
        req = Request(
            self.base_url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urlopen(req, timeout=self.timeout_s) as r:
                return bytes(r.read())
        except (OSError, URLError) as exc:
            raise TargetError(f"profiling {self.base_url}: POST {path} failed: {exc}") from exc

    def _new_trace(self, before: set[Path]) -> Path:
        """The trace the worker wrote for this window, once it reads back whole."""
        deadline = time.monotonic() + self.trace_wait_s
        last: TargetError | None = None
        while time.monotonic() < deadline:
            new = sorted(set(self.trace_dir.glob(self.TRACE_GLOB)) - before, key=lambda p: p.stat().st_mtime)
            ranked = [p for p in new if self.RANK0 in p.name] or new
            if ranked:
                try:
                    read_trace(ranked[-1])  # written after /stop_profile returns: wait until whole
                    return ranked[-1]
                except TargetError as exc:
                    last = exc
            time.sleep(0.2)
        self._no_trace(last)

    def _no_trace(self, last: TargetError | None) -> NoReturn:
        raise TargetError(
            f"{self.base_url}: no complete profiler trace appeared in {self.trace_dir} within {self.trace_wait_s:g} s"
            + (f" ({last})" if last else "")
        )


def profiler_dir(command: Sequence[str]) -> Path | None:
    """The ``torch_profiler_dir`` of a vLLM server command's ``--profiler-config`` (None: not profiled)."""
    folder = profiler_config_dir(command)
    return Path(folder) if folder is not None else None


def checkpoint_layers(command: Sequence[str], cwd: Path | None = None) -> int | None:
    """``num_hidden_layers`` of the local checkpoint a server command serves (``--model``,
    ``serve M``, or SGLang's ``--model-path``)."""
    words = list(command)
    model = None
    for i, word in enumerate(words[:-1]):
        if word in ("--model", "--model-path", "serve"):  # --model-path: SGLang's launch_server
            model = words[i + 1]
    for word in words:
        if word.startswith(("--model=", "--model-path=")):
            model = word.split("=", 1)[1]
    if model is None:
        return None
    path = Path(model) if Path(model).is_absolute() or cwd is None else Path(cwd) / model
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    layers = config.get("num_hidden_layers") if isinstance(config, dict) else None
    return int(layers) if isinstance(layers, int) and layers > 0 else None


def server_profiler(
    command: Sequence[str],
    url: str,
    *,
    cwd: Path | None = None,
    model: str | None = None,
    server_dir: Path | None = None,
) -> ServerProfiler | None:
    """A `ServerProfiler` for a server started from ``command``, where it names a torch profiler
    dir (``{server_dir}`` in it: the server's own folder, ``server_dir``)."""
    if server_dir is not None:
        command = [word.replace("{server_dir}", str(server_dir)) for word in command]
    folder = profiler_dir(command)
    if folder is None:
        return None
    if not folder.is_absolute() and cwd is not None:
        folder = Path(cwd) / folder
    return ServerProfiler(url, folder, model=model, n_layers=checkpoint_layers(command, cwd))
