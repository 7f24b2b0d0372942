"""A ``vllm_bench`` workload: vLLM's own ``vllm bench serve`` against each side's server, its
result JSON parsed, repetitions reduced to their median, absolute bounds checked on every raw
repetition, and the two sides compared pair by pair.

The workload, as vllm-project/perf-eval's ``vllm_bench.configs`` entries spell it::

    workload:
      kind: vllm_bench
      backend: openai            # vllm bench serve --backend (default openai)
      dataset: random            # --dataset-name (default random: --random-input-len/--random-output-len)
      input_len: 1024
      output_len: 1024
      num_prompts: 64
      max_concurrency: [1, 4, 16]    # an int or a list: one run (and one outcome) per value
      repetitions: 3                 # odd; the median of every numeric field is what is compared
      args: {num_warmups: 8, temperature: 0}   # more `vllm bench serve` options (not the ones fasttrack sets)
    assertions:                      # perf-eval PR #80: absolute bounds, on every raw repetition
      median_tpot_ms: {max: 12.0}
      output_throughput: {min: 500}

One server at a time (the GPUs hold one deployment): the baseline's server runs every
concurrency's repetitions, then the candidate's. Each repetition must be complete (``completed ==
num_prompts``, no ``failed`` request, every number finite), or the outcome is failed (candidate)
or errored (baseline: the comparison is void). The benchmark's ``metric`` (a field of the result
JSON such as ``median_tpot_ms``, ``output_throughput``) is compared as repetition pairs (i-th of
the baseline against i-th of the candidate) with the benchmarks' "not slower than stock" rule;
``assertions`` bound the candidate's raw repetitions. Without ``vllm`` on PATH: not_run(dependency).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.kinds.benchmarks.serving_bench import (  # noqa: F401  (re-exported: the tool's API)
    BenchTool,
    Repetition,
    bound_violations,
    concurrencies,
    judge,
    median_fields,
    prompts_at,
    read_result,
    side_cpus,
)
from fasttrack.kinds.benchmarks.serving_bench import run as run_tool
from fasttrack.kinds.benchmarks.vllm_pairs import read_json, runner_for
from fasttrack.manifest.vllm_bench import normalised_arg
from fasttrack.manifest.vllm_serve import bench_words, console_runnable

if TYPE_CHECKING:
    from fasttrack.evidence import CheckOutcome
    from fasttrack.kinds.context import RunContext
    from fasttrack.plan.instance import CheckInstance

KIND = "vllm_bench"
# Fields of the result JSON that count requests rather than measure them.
COUNT_FIELDS = ("completed", "failed", "num_prompts")


def extra_args(args: Mapping[str, Any] | None) -> list[str]:
    """perf-eval's encoding of ``args``: True -> the flag; False/None -> nothing; a list -> the flag
    per item; a mapping -> JSON; anything else -> the flag and its value."""
    words: list[str] = []
    for name, value in (args or {}).items():
        flag = f"--{normalised_arg(name)}"
        if value is True:
            words.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            for item in value:
                words += [flag, json.dumps(item) if isinstance(item, (dict, list)) else str(item)]
        else:
            words += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return words


def bench_command(
    workload: Mapping[str, Any],
    url: str,
    model: str,
    concurrency: int,
    result_dir: Path,
    name: str,
    seed: int,
    program: Sequence[str] = ("vllm", "bench", "serve"),
) -> list[str]:
    """The ``vllm bench serve`` command line of one repetition (``program``: how it is started
    here, `fasttrack.manifest.vllm_serve.bench_words`)."""
    dataset = str(workload.get("dataset", "random"))
    command = [
        *program,
        "--backend",
        str(workload.get("backend", "openai")),
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
        "--save-result",
        "--result-dir",
        str(result_dir),
        "--result-filename",
        name,
        "--disable-tqdm",
    ]
    if not any(normalised_arg(k) == "num-warmups" for k in workload.get("args") or {}):
        # one wave of requests right before the timed ones: a server that sat idle while the other
        # side ran starts cold (measured: at concurrency 8 without it, ~2x slower; vllm_pairs.py)
        command += ["--num-warmups", str(concurrency)]
    if str(workload.get("backend", "openai")) == "openai-chat":
        command += ["--endpoint", "/v1/chat/completions"]
    if dataset == "random":
        # every request runs to output_len: otherwise a random prompt may stop early and decode collapses
        command += ["--random-input-len", str(int(workload["input_len"]))]
        command += ["--random-output-len", str(int(workload["output_len"])), "--ignore-eos"]
    else:
        command += ["--input-len", str(int(workload["input_len"])), "--output-len", str(int(workload["output_len"]))]
    return command + extra_args(workload.get("args"))


def bench_program(manifest: Any) -> tuple[str, ...] | None:
    """How ``vllm bench serve`` starts here: ``vllm`` on PATH; for a vllm target, whose servers run
    on this interpreter, its choice (`fasttrack.manifest.vllm_serve.bench_words`). None: it cannot."""
    from importlib.util import find_spec

    if manifest.target.kind == "vllm" and (console_runnable() or find_spec("vllm") is not None):
        return bench_words()
    return ("vllm", "bench", "serve") if shutil.which("vllm") is not None else None


def tokenizer_args(
    context: RunContext, workload: Mapping[str, Any], point: Mapping[str, Any] | None = None
) -> list[str]:
    """A vllm target's checkpoint folder as the benchmark's tokenizer: the served name is no model
    id to download (and a gate run is offline); ``model: "{model}"``: the point's checkpoint."""
    vllm = context.manifest.target.vllm
    if vllm is None or "tokenizer" in (workload.get("args") or {}):
        return []
    checkpoint = str((point or {}).get("model", vllm.model)) if vllm.model == "{model}" else vllm.model
    local = context.manifest.resolve_path(checkpoint)
    return ["--tokenizer", str(local if local.exists() else checkpoint)]


def _args(
    workload: Mapping[str, Any], url: str, model: str, concurrency: int, folder: Path, name: str, seed: int
) -> list[str]:
    return bench_command(workload, url, model, concurrency, folder, name, seed, program=())


VLLM = BenchTool(
    kind=KIND,
    name="vllm bench serve",
    artifact="vllm-bench",
    program=bench_program,
    missing="`vllm bench serve` needs vLLM, which is not installed here",
    args=_args,
    load=read_json,
    tokenizer=tokenizer_args,
    runner=runner_for,
    missing_metric="a missing field needs --percentile-metrics / --metric-percentiles in args; ",
)


def run(instance: CheckInstance, context: RunContext) -> list[CheckOutcome]:
    return run_tool(instance, context, VLLM)
