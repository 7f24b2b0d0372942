"""The mixed-batch probe on the REAL in-process example (examples/mini-k3, the manifest's own
settings): the clean candidate passes, and a candidate that samples every row of a batch with the
first row's temperature/top_p (the example's planted fault ``first_row_sampling``, mini_k3/faults.py)
fails. tests/acceptance/test_check_drafter_and_batch_faults.py runs the same pair through the CLI."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fasttrack.kinds.features.run import probe_settings
from fasttrack.manifest import load_manifest
from fasttrack.probes.mixed_batch import probe_mixed_batches
from fasttrack.probes.sides import probe_pair, probe_side
from support.paths import EXAMPLE

pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")
pytest.importorskip("mini_k3.engine")

POINT = {"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1}


def with_planted(manifest, **options):
    """``manifest`` with the example's fault set as its target factory, ``options`` planted."""
    python = replace(manifest.target.python, factory="mini_k3.faults:create", options=options)
    return replace(manifest, target=replace(manifest.target, python=python))


@pytest.fixture(scope="module")
def sides():
    manifest = load_manifest(EXAMPLE / "fasttrack.yaml")
    probe = next(p for p in manifest.features if p.name == "mixed_batches")
    settings = probe_settings("mixed_batches", dict(probe.settings), manifest)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    planted = with_planted(manifest, first_row_sampling=True)
    with probe_pair(manifest, POINT) as (baseline, candidate), probe_side(planted, "candidate", POINT) as faulty:
        yield baseline, candidate, faulty, settings
    torch.set_num_threads(previous)


def test_the_clean_example_passes_in_a_mixed_batch(sides):
    baseline, candidate, _faulty, settings = sides
    result = probe_mixed_batches(baseline, candidate, settings)
    assert result.status == "passed", result.reason
    assert {r["row"] for r in result.details["rows"]} >= {"greedy+stop", "structured", "T1.3"}


def test_first_row_sampling_parameters_leaking_fail_on_the_example(sides):
    baseline, _candidate, faulty, settings = sides
    result = probe_mixed_batches(baseline, faulty, settings)
    assert result.status == "failed" and "mixed batch" in result.reason, result.reason
