"""The features runner over the deterministic fake target: the clean candidate passes every
probe, and each planted fault fails the probe meant to catch it, with a precise reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from fasttrack.evidence import Status
from fasttrack.kinds.context import RunContext
from fasttrack.kinds.features import run as features
from fasttrack.manifest import ScopePoint, load_manifest
from fasttrack.plan import CheckInstance

FAKE_MANIFEST = Path(__file__).resolve().parents[1] / "probes" / "fake_manifest.yaml"
POINT = ScopePoint.of({"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1})


def manifest_with(tmp_path: Path, faults: list[str]):
    text = FAKE_MANIFEST.read_text().replace("faults: []", f"faults: {faults}")
    path = tmp_path / "fasttrack.yaml"
    path.write_text(text)
    return load_manifest(path)


def run_feature(tmp_path: Path, name: str, faults: list[str] = ()):
    manifest = manifest_with(tmp_path, list(faults))
    probe = manifest.feature(name)
    instance = CheckInstance(
        f"features/{name}@{POINT.id}",
        "features",
        name,
        POINT,
        True,
        True,
        None,
        None,
        None,
        1.0,
        60.0,
        {"name": name, **{k: v for k, v in probe.settings.items()}},
    )
    context = RunContext(manifest, None, tmp_path, tmp_path / "artifacts", 60.0)
    return features.run(instance, context)


@pytest.mark.parametrize(
    "name", ["full_context", "temperature_sampling", "structured_output", "stop_strings", "n_samples", "logprobs"]
)
def test_clean_candidate_passes_every_probe(tmp_path, name):
    outcome = run_feature(tmp_path, name)
    assert outcome.status is Status.PASSED, outcome.reason
    assert outcome.measurements["probe"] == name
    assert outcome.kind == "features" and outcome.scope_point_id == POINT.id


@pytest.mark.parametrize(
    "name, fault, words",
    [
        ("temperature_sampling", "temperature_ignored", "do not follow the baseline's softmax(logits/T) at T=0.7"),
        ("structured_output", "grammar_skipped", "violates the schema"),
        ("full_context", "crash_at_max_context", "failed a request of 248 + 8 = 256 tokens"),
        ("full_context", "far_position_drift", "diverge at positions 2"),
        ("stop_strings", "stop_ignored", "contains the stop string"),
        ("n_samples", "n_ignored", "all identical"),
        ("logprobs", "logprobs_shifted", "differs by 0.500 nats"),
    ],
)
def test_planted_fault_fails_its_probe(tmp_path, name, fault, words):
    outcome = run_feature(tmp_path, name, [fault])
    assert outcome.status is Status.FAILED
    assert words in outcome.reason


def test_planted_fault_does_not_fail_unrelated_probe(tmp_path):
    # a skipped grammar mask is invisible to unconstrained probes: each probe tests its own feature
    assert run_feature(tmp_path, "logprobs", ["grammar_skipped"]).status is Status.PASSED


def test_temperature_probe_records_its_statistics(tmp_path):
    outcome = run_feature(tmp_path, "temperature_sampling", ["temperature_ignored"])
    m = outcome.measurements
    assert m["p_value"] < 0.01 and m["statistic"] is not None
    tests = m["details"]["tests"]
    assert len(tests) == 2 * 2 * 2 * (3 + 1)  # temperatures x top_p x prompts x (positions + the score test)
    assert {t["test"] for t in tests} == {"chi_square", "score"}
    assert m["details"]["per_test_alpha"] == pytest.approx(0.01 / len(tests))


def test_unknown_factory_is_a_target_error(tmp_path):
    manifest = manifest_with(tmp_path, [])
    text = (
        (tmp_path / "fasttrack.yaml").read_text().replace("fasttrack.probes.fake:create", "no_such_module_xyz:create")
    )
    (tmp_path / "fasttrack.yaml").write_text(text)
    manifest = load_manifest(tmp_path / "fasttrack.yaml")
    instance = CheckInstance(
        "features/logprobs",
        "features",
        "logprobs",
        POINT,
        True,
        True,
        None,
        None,
        None,
        1.0,
        60.0,
        {"name": "logprobs"},
    )
    outcome = features.run(instance, RunContext(manifest, None, tmp_path, tmp_path / "a", 60.0))
    assert outcome.status is Status.ERRORED and outcome.reason_code == "target"
    assert "no_such_module_xyz" in outcome.reason


def test_a_target_needing_a_module_this_machine_lacks_is_not_run_dependency(tmp_path, monkeypatch):
    from fasttrack.targets.protocol import TargetDependencyMissing

    def missing(*_args, **_kwargs):
        raise TargetDependencyMissing("toy_kernels", "toy.target:create")

    monkeypatch.setattr(features, "probe_pair", missing)
    outcome = run_feature(tmp_path, "temperature_sampling")
    assert (outcome.status, outcome.reason_code) == (Status.NOT_RUN, "dependency")
    assert "needs the Python module 'toy_kernels'" in outcome.reason
