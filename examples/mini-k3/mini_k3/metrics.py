"""Prometheus metrics for the mini-K3 server.

Engine counters (tokens, speculative decoding, decode steps per path, corrupted requests) are read
from the engine's own statistics at scrape time by a custom collector, so there is one source of
truth; HTTP request counts are ordinary counters. Each server owns its registry (no global state).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from mini_k3.engine import EngineStats

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class EngineCollector(Collector):
    """Exposes an engine's ``EngineStats`` (read through ``read_stats``) as Prometheus families."""

    def __init__(self, read_stats: Callable[[], EngineStats]):
        self._read_stats = read_stats

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        stats = self._read_stats()
        counters = (
            ("minik3_prompt_tokens", "Prompt tokens processed.", stats.prompt_tokens),
            ("minik3_generation_tokens", "Tokens generated.", stats.generation_tokens),
            ("minik3_spec_decode_num_drafts", "Speculative steps that proposed a draft.", stats.speculative.drafts),
            ("minik3_spec_decode_num_draft_tokens", "Draft tokens proposed.", stats.speculative.draft_tokens),
            ("minik3_spec_decode_num_accepted_tokens", "Draft tokens accepted.", stats.speculative.accepted_tokens),
            ("minik3_corrupted_requests", "Requests whose logits held NaN or infinity.", stats.corrupted_requests),
            ("minik3_engine_sequences", "Sequences generated or scored by the engine.", stats.sequences),
            ("minik3_prefill_seconds", "Wall time in prefill forward passes.", stats.prefill_seconds),
            ("minik3_decode_seconds", "Wall time in decode forward passes.", stats.decode_seconds),
        )
        for name, documentation, value in counters:
            yield CounterMetricFamily(name, documentation, value=value)
        steps = CounterMetricFamily(
            "minik3_decode_steps", "Batched decode forward passes, by decode path.", labels=["path"]
        )
        for path, count in sorted(stats.decode_steps_by_path.items()):
            steps.add_metric([path], count)
        yield steps
        techniques = CounterMetricFamily(
            "minik3_technique_steps", "Decode forward passes, by latency technique that ran in them.", labels=["technique"]
        )
        for name, count in sorted(stats.decode_steps_by_technique.items()):
            techniques.add_metric([name], count)
        yield techniques
        by_batch = CounterMetricFamily(
            "minik3_decode_steps_by_batch_size",
            "Batched decode forward passes, by decode path and number of sequences in the batch.",
            labels=["path", "batch_size"],
        )
        for path, counts in sorted(stats.decode_steps_by_batch_size.items()):
            for batch_size, count in sorted(counts.items()):
                by_batch.add_metric([path, str(batch_size)], count)
        yield by_batch
        yield GaugeMetricFamily(
            "minik3_spec_decode_mean_acceptance_length",
            "Tokens emitted per speculative step (1 + accepted / drafts).",
            value=stats.speculative.mean_acceptance_length,
        )


class ServerMetrics:
    """The registry of one server: HTTP request counts plus the engine's counters."""

    def __init__(self, read_stats: Callable[[], EngineStats]):
        disable_created_metrics()  # no `_created` series: counters since start are what is scraped
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "minik3_requests",
            "HTTP requests served, by endpoint and status code.",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self.registry.register(EngineCollector(read_stats))

    def count_request(self, endpoint: str, status: int) -> None:
        self.requests.labels(endpoint=endpoint, status=str(status)).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
