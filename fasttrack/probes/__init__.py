"""Preserved-feature probes: one module per feature, each a function
``probe_<feature>(baseline, candidate, settings) -> ProbeResult`` over two `ProbeTarget`s.

``PROBES`` maps the manifest's feature name to (module, function, settings class); the features
runner looks probes up here (imported lazily, so one probe's dependency cannot break another).
"""

from __future__ import annotations

PROBES: dict[str, tuple[str, str, str]] = {
    "full_context": ("fasttrack.probes.full_context", "probe_full_context", "FullContextSettings"),
    "temperature_sampling": ("fasttrack.probes.temperature", "probe_temperature", "TemperatureSettings"),
    "structured_output": ("fasttrack.probes.structured_output", "probe_structured_output", "StructuredSettings"),
    "stop_strings": ("fasttrack.probes.stop_strings", "probe_stop_strings", "StopSettings"),
    "n_samples": ("fasttrack.probes.n_samples", "probe_n_samples", "NSettings"),
    "logprobs": ("fasttrack.probes.logprobs", "probe_logprobs", "LogprobSettings"),
    "token_coverage": ("fasttrack.probes.token_coverage", "probe_token_coverage", "TokenCoverageSettings"),
    "mixed_batches": ("fasttrack.probes.mixed_batch", "probe_mixed_batches", "MixedBatchSettings"),
}

# Probes that compare the two sides' numerics far out in the context: run once per dtype the scope
# declares (`fasttrack.kinds.features.plan`), since a bug of one format (a position or mask computed
# in bf16) is bit-identical to stock in another.
EVERY_DTYPE: frozenset[str] = frozenset({"full_context"})
