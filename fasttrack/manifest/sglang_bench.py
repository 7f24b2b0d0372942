"""The ``sglang_bench`` workload's options that fasttrack sets on ``python -m
sglang.bench_serving`` itself (a workload's ``args`` may not override them), and the fields of
its result line a benchmark may compare. One definition, read by the manifest's rules
(`fasttrack validate`) and by the benchmark that runs the tool."""

from __future__ import annotations

import re

RESERVED_ARGS = frozenset(
    {
        "backend",
        "base-url",
        "host",
        "port",
        "model",
        "dataset-name",
        "num-prompts",
        "max-concurrency",
        "random-input-len",
        "random-output-len",
        "random-range-ratio",
        "sharegpt-output-len",
        "disable-ignore-eos",
        "output-file",
        "seed",
    }
)

# Numeric fields of the result line (`sglang.bench_serving.benchmark`'s ``result`` dict).
RESULT_FIELD = re.compile(
    r"^((mean|median|std|p[0-9]+(\.[0-9]+)?)_(ttft|tpot|itl|e2e_latency)_ms|request_throughput"
    r"|input_throughput|output_throughput|accept_length)$"
)
