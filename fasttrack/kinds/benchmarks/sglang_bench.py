"""A ``sglang_bench`` workload: SGLang's own benchmark client, ``python -m sglang.bench_serving``,
against each side's server, its result line read, and the two sides compared pair by pair as a
``vllm_bench`` workload is (`serving_bench`: the same pairs, completeness, bounds and rule).

The workload, in SGLang's own terms::

    workload:
      kind: sglang_bench
      backend: sglang            # --backend (default sglang: SGLang's native /generate;
                                 #   sglang-oai: /v1/completions, for any OpenAI-compatible server)
      dataset: random            # --dataset-name (default random; random-ids needs no ShareGPT file)
      input_len: 1024            # --random-input-len
      output_len: 1024           # --random-output-len
      num_prompts: 64
      max_concurrency: [1, 16]   # an int or a list: one run (and one outcome) per value
      repetitions: 3             # odd
      args: {warmup_requests: 16, dataset_path: /data/ShareGPT_V3.json}   # more bench_serving options

Every run writes one JSON line (``--output-file``, appended: one file per run, its last line
read; the arguments it echoes first, such as ``request_rate``, are not results) in SGLang's field
names: ``completed``, ``request_throughput``, ``input_throughput``,
``output_throughput``, ``{mean,median,std,p99}_{ttft,tpot,e2e_latency}_ms``,
``{mean,median,std,p95,p99}_itl_ms``, ``concurrency``, ``accept_length`` (null without
speculative decoding: not a number, so not a field). SGLang's result has no ``failed`` count: a run
is complete when ``completed`` equals the prompts sent. ``--random-range-ratio 1`` makes every
prompt exactly ``input_len`` and every output ``output_len`` tokens (SGLang samples lengths from
``[len x ratio, len]``, and ignores EOS unless told ``--disable-ignore-eos``). The tokenizer is the
``sglang`` target's ``model_path`` (the served name is no model id to download; a gate run is
offline). Without SGLang here: not_run(dependency).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.kinds.benchmarks.serving_bench import BenchTool
from fasttrack.kinds.benchmarks.serving_bench import run as run_tool
from fasttrack.kinds.benchmarks.vllm_bench import extra_args
from fasttrack.kinds.benchmarks.vllm_pairs import BenchRunner, subprocess_runner
from fasttrack.manifest.sglang_launch import BENCH_MODULE, bench_words
from fasttrack.manifest.vllm_bench import normalised_arg

if TYPE_CHECKING:
    from fasttrack.evidence import CheckOutcome
    from fasttrack.kinds.context import RunContext
    from fasttrack.manifest import Manifest
    from fasttrack.plan.instance import CheckInstance

KIND = "sglang_bench"
TOOL = f"python -m {BENCH_MODULE}"


def bench_command(
    workload: Mapping[str, Any],
    url: str,
    model: str,
    concurrency: int,
    result_dir: Path,
    name: str,
    seed: int,
    program: Sequence[str] = ("python", "-m", BENCH_MODULE),
) -> list[str]:
    """The ``python -m sglang.bench_serving`` command line of one run."""
    dataset = str(workload.get("dataset", "random"))
    command = [
        *program,
        "--backend",
        str(workload.get("backend", "sglang")),
        "--base-url",
        url,
        "--model",
        model,
        "--dataset-name",
        dataset,
        "--num-prompts",
        str(int(workload["num_prompts"])),
        "--max-concurrency",
        str(concurrency),
        "--seed",
        str(seed),
        "--output-file",
        str(Path(result_dir) / name),
        "--disable-tqdm",
    ]
    if not any(normalised_arg(k) == "warmup-requests" for k in workload.get("args") or {}):
        # a wave of requests right before the timed ones, as vllm_bench's --num-warmups
        command += ["--warmup-requests", str(concurrency)]
    if dataset.startswith("random"):
        command += ["--random-input-len", str(int(workload["input_len"]))]
        command += ["--random-output-len", str(int(workload["output_len"])), "--random-range-ratio", "1"]
    elif dataset == "sharegpt":
        command += ["--sharegpt-output-len", str(int(workload["output_len"]))]
    return command + extra_args(workload.get("args"))


def bench_program(manifest: Manifest) -> tuple[str, ...] | None:
    """How the client starts here: an ``sglang`` target's interpreter; otherwise (or with
    fasttrack's own interpreter) where SGLang is importable here. None: it cannot."""
    sglang = manifest.target.sglang
    if sglang is not None and sglang.python:
        return bench_words(sglang)
    return bench_words(sglang) if find_spec("sglang") is not None else None


# The run's arguments, echoed at the head of its result line: not results (``request_rate`` is
# Infinity, SGLang's default, which as a result would be a non-finite number).
ARGUMENT_FIELDS = (
    "backend",
    "dataset_name",
    "request_rate",
    "max_concurrency",
    "sharegpt_output_len",
    "random_input_len",
    "random_output_len",
    "random_range_ratio",
)


def read_line(path: Path) -> Mapping[str, Any]:
    """The results of the last line of a run's JSONL file (``bench_serving`` appends one per run)."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        raise ValueError("the result file is empty")
    data = json.loads(lines[-1])
    if not isinstance(data, Mapping):
        raise ValueError("the result line is not a JSON object")
    return {k: v for k, v in data.items() if k not in ARGUMENT_FIELDS}


def tokenizer_args(context: RunContext, workload: Mapping[str, Any], point: Mapping[str, Any]) -> list[str]:
    """An ``sglang`` target's model path as the client's tokenizer (``{model}``: the point's)."""
    sglang = context.manifest.target.sglang
    if sglang is None or "tokenizer" in (workload.get("args") or {}):
        return []
    checkpoint = str(point.get("model", sglang.model_path)) if sglang.model_path == "{model}" else sglang.model_path
    local = context.manifest.resolve_path(checkpoint)
    return ["--tokenizer", str(local if local.exists() else checkpoint)]


def _args(
    workload: Mapping[str, Any], url: str, model: str, concurrency: int, folder: Path, name: str, seed: int
) -> list[str]:
    return bench_command(workload, url, model, concurrency, folder, name, seed, program=())


def _runner(context: RunContext, program: Sequence[str]) -> BenchRunner:
    return subprocess_runner(context, program, TOOL)


SGLANG = BenchTool(
    kind=KIND,
    name=TOOL,
    artifact="sglang-bench",
    program=bench_program,
    missing=f"`{TOOL}` needs SGLang, which is not installed here (`pip install sglang`)",
    args=_args,
    load=read_line,
    tokenizer=tokenizer_args,
    runner=_runner,
    missing_metric="accept_length exists only for a server that drafts (speculative decoding); ",
    result_suffix="jsonl",
)


def run(instance: CheckInstance, context: RunContext) -> list[CheckOutcome]:
    return run_tool(instance, context, SGLANG)
