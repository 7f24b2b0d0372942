"""The ``vllm_bench`` workload's options that fasttrack sets on ``vllm bench serve`` itself: a
workload's ``args`` may not override them (as perf-eval refuses). One definition, read by the
manifest's rules (`fasttrack validate`) and by the benchmark that runs the tool."""

from __future__ import annotations

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
        "input-len",
        "output-len",
        "save-result",
        "result-dir",
        "result-filename",
        "ignore-eos",
    }
)


def normalised_arg(name: str) -> str:
    """An ``args`` key as the flag it sets: ``num_warmups`` and ``--num-warmups`` -> ``num-warmups``."""
    return name.lstrip("-").replace("_", "-")
