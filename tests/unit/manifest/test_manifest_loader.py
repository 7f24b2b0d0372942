"""load_manifest: the frozen typed model, its data and digest, and errors listing every problem."""

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
import yaml

from fasttrack.errors import ManifestError
from fasttrack.manifest import Manifest, load_manifest

REPO = Path(__file__).resolve().parents[3]
VALID = sorted((REPO / "tests/fixtures/manifests/valid").glob("*.yaml"))
EXAMPLES = [REPO / "examples/kimi-k3-latency/fasttrack.yaml", REPO / "examples/mini-k3/fasttrack.yaml"]


@pytest.mark.parametrize("path", VALID + EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_valid_manifests_load(path):
    manifest = load_manifest(path)
    assert isinstance(manifest, Manifest)
    assert manifest.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    json.dumps(manifest.data)  # plain JSON for the evidence
    assert manifest.scope_points()
    assert manifest.scope_size() == len(manifest.scope_points())


def test_data_matches_the_yaml_and_is_a_copy():
    path = REPO / "tests/fixtures/manifests/valid/full.yaml"
    manifest = load_manifest(path)
    assert manifest.data == yaml.safe_load(path.read_text())
    manifest.data["fasttrack"] = 99
    assert manifest.data["fasttrack"] == 1


def test_model_is_frozen():
    manifest = load_manifest(REPO / "tests/fixtures/manifests/valid/minimal.yaml")
    with pytest.raises(dataclasses.FrozenInstanceError):
        manifest.sha256 = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        manifest.evals[0:0] = ()  # type: ignore[index]
    with pytest.raises(TypeError):
        manifest.preserve["logprobs"] = True  # type: ignore[index]


def test_typed_sections_of_the_full_manifest():
    m = load_manifest(REPO / "tests/fixtures/manifests/valid/full.yaml")
    assert m.id == "full-example"
    assert m.switch.name == "latency_specialized" and m.switch.default is False
    assert m.switch.proof.source == "inprocess"
    assert [h.accelerator for h in m.scope.hardware] == ["cpu", "NVIDIA GB300"]
    assert m.scope.batch.representative() == (1, 2, 4, 8, 16, 17, 32, 64)
    assert m.scope.speculative.draft_lengths == (1, 3, 7)
    assert m.target.python.factory == "full.target:create"
    assert m.evals[0].repeats == 2 and m.evals[0].data_files == ("data/mrcr.jsonl",)
    assert m.divergence.prompts_from == "mrcr"
    logprobs = m.feature("logprobs")
    assert logprobs.enabled and logprobs.required is False and logprobs.timeout_s == 60
    assert dict(logprobs.settings) == {"top_logprobs": 5, "max_abs_diff": 0.05}
    [claim] = m.benchmarks[0].claims
    assert claim.is_synthetic and claim.is_comparable
    assert claim.baseline.setup["switch"] is False and claim.candidate.setup["switch"] is True
    assert m.timeout_for("evals") == 7200 and m.timeout_for("features") == 600 and m.timeout_for("evals", 5) == 5
    assert m.line_of(("scope", "batch")) is not None


def test_defaults_filled_in():
    m = load_manifest(REPO / "tests/fixtures/manifests/valid/minimal.yaml")
    assert m.evals == () and m.benchmarks == () and m.divergence is None
    assert m.preserve["logprobs"] is False and m.preserve["full_context"] is True
    assert [p.name for p in m.features if p.enabled] == ["full_context", "temperature_sampling", "structured_output"]
    assert m.timeout_for("kernels") == 600


def test_kimi_claims_keep_their_conditions():
    m = load_manifest(REPO / "examples/kimi-k3-latency/fasttrack.yaml")
    claims = {c.id: c for b in m.benchmarks for c in b.claims}
    assert claims["dspark-842"].is_synthetic
    assert claims["dspark-842"].conditions["prefill"] == "excluded"
    assert claims["dspark-842"].conditions["acceptance_length"] == 6
    agentx = claims["agentx-p90-224-to-403"]
    assert not agentx.is_comparable and agentx.setup_differences() == ("gpus",)
    assert {c.candidate.value for c in claims.values()} >= {193.3, 256.4, 842, 403.2, 69, 13}
    assert m.warnings == ()  # the AgentX mismatch is acknowledged with comparable: false


def test_error_lists_every_problem_with_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    text = (REPO / "tests/fixtures/manifests/valid/minimal.yaml").read_text()
    text = text.replace("default: false", "default: true").replace("title: Tiny", "titel: Tiny")
    path.write_text(text + "scope2: 1\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    problems = caught.value.problems
    assert len(problems) == 4  # title missing, titel unknown, default true, scope2 unknown
    assert all(p.startswith(f"{path}:") for p in problems)
    assert caught.value.exit_code == 2


def test_missing_and_non_utf8_files(tmp_path):
    with pytest.raises(ManifestError, match="cannot read file"):
        load_manifest(tmp_path / "absent.yaml")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"fasttrack: 1\n\xff\xfe\n")
    with pytest.raises(ManifestError, match="not UTF-8"):
        load_manifest(binary)


def test_warnings_do_not_fail():
    m = load_manifest(REPO / "tests/fixtures/manifests/valid/not-comparable-claim.yaml")
    [warning] = m.warnings
    assert "not comparable" in warning and "gpus (8 vs 16)" in warning and ":15: warning:" in warning
