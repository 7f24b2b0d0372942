"""The mixed-batch probe on the REAL in-process example (examples/mini-k3, the manifest's own
settings): the clean candidate passes, and a candidate that samples every row of a batch with the
first row's temperature/top_p (planted here in a test-local wrapper, not in the example) fails."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from fasttrack.kinds.features.run import probe_settings
from fasttrack.manifest import load_manifest
from fasttrack.probes.base import Completion, CompletionRequest
from fasttrack.probes.mixed_batch import probe_mixed_batches
from fasttrack.probes.sides import probe_pair
from support.paths import EXAMPLE

pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")
pytest.importorskip("mini_k3.engine")

POINT = {"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1}


class FirstRowSampling:
    """The candidate, but every row of a batch is sampled with the first row's temperature and top_p."""

    def __init__(self, inner) -> None:
        self.inner, self.name = inner, inner.name

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def complete_batch(self, requests: Sequence[CompletionRequest]) -> list[list[Completion]]:
        first = requests[0]
        return self.inner.complete_batch(
            [replace(r, temperature=first.temperature, top_p=first.top_p) for r in requests]
        )

    def complete(self, request: CompletionRequest) -> list[Completion]:
        return self.complete_batch([request])[0]


@pytest.fixture(scope="module")
def sides():
    manifest = load_manifest(EXAMPLE / "fasttrack.yaml")
    probe = next(p for p in manifest.features if p.name == "mixed_batches")
    settings = probe_settings("mixed_batches", dict(probe.settings), manifest)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    with probe_pair(manifest, POINT) as (baseline, candidate):
        yield baseline, candidate, settings
    torch.set_num_threads(previous)


def test_the_clean_example_passes_in_a_mixed_batch(sides):
    baseline, candidate, settings = sides
    result = probe_mixed_batches(baseline, candidate, settings)
    assert result.status == "passed", result.reason
    assert {r["row"] for r in result.details["rows"]} >= {"greedy+stop", "structured", "T1.3"}


def test_first_row_sampling_parameters_leaking_fail_on_the_example(sides):
    baseline, candidate, settings = sides
    result = probe_mixed_batches(baseline, FirstRowSampling(candidate), settings)
    assert result.status == "failed" and "mixed batch" in result.reason, result.reason
