"""The plugin's proof of path: decode steps per technique, on vLLM's /metrics.

The counter lives in the worker process, where the model runs; vLLM's API server shows it on
/metrics when the server runs with PROMETHEUS_MULTIPROC_DIR set to an empty folder (prometheus'
multi-process mode). Created on first use, so nothing of it exists while the plugin is off.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

_COUNTER: list[Any] = []


def count_step(techniques: Iterable[str]) -> None:
    if not _COUNTER:
        from prometheus_client import Counter

        _COUNTER.append(Counter("vllm_mini_k3_latency_steps", "Decode steps that ran a latency-path technique",
                                ["technique"]))
    for technique in techniques:
        _COUNTER[0].labels(technique=technique).inc()
