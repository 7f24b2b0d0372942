"""The claims runner: the claims lint recorded as evidence, one outcome per claim."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fasttrack.evidence import Status
from fasttrack.kinds.base import load_runner
from fasttrack.kinds.claims import run as runner
from fasttrack.kinds.context import RunContext
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.plan import build_plan

KIMI = Path(__file__).resolve().parents[3] / "examples" / "kimi-k3-latency" / "fasttrack.yaml"


def cpu_machine():
    return SimpleNamespace(accelerator="cpu", accelerator_count=0)


def context(tmp_path, manifest=None, environment=None):
    return RunContext(manifest, environment or cpu_machine(), tmp_path, tmp_path / "a", 10.0)


@pytest.fixture(scope="module")
def kimi_outcomes(tmp_path_factory):
    manifest = load_manifest(KIMI)
    from fasttrack.environment import detect_environment

    plan = build_plan(manifest, detect_environment(accelerators=False), KINDS)
    instances = plan.by_kind()["claims"]
    assert all(i.runnable and i.scope_point is None for i in instances)  # no hardware needed
    ctx = context(tmp_path_factory.mktemp("claims"), manifest)
    return {i.name: load_runner(KINDS, "claims").run(i, ctx) for i in instances}


def test_agentx_comparison_is_flagged_not_comparable(kimi_outcomes):
    o = kimi_outcomes["agentx-p90-224-to-403"]
    assert (o.status, o.reason_code, o.required) == (Status.NOT_RUN, "not_comparable", False)
    assert "gpus: 8 vs 16" in o.reason and "not comparable" in o.measurements["assessment"]
    assert o.measurements["status"] == "not_comparable" and "not_comparable" in o.measurements["labels"]


def test_842_headline_is_labelled_synthetic_acceptance_with_prefill_excluded(kimi_outcomes):
    o = kimi_outcomes["dspark-842"]
    assert (o.status, o.required, o.measurements["status"]) == (Status.PASSED, False, "labelled")
    assert {"synthetic_acceptance", "prefill_excluded"} <= set(o.measurements["labels"])
    assert o.measurements["measured"] is None  # the lint measures nothing
    assert o.measurements["here"].startswith("not measurable here: needs NVIDIA GB300")


def test_plain_claims_are_comparable_and_unlabelled(kimi_outcomes):
    o = kimi_outcomes["b1-8gpu-193"]
    assert (o.status, o.measurements["status"], o.measurements["labels"]) == (Status.PASSED, "comparable", [])
    assert o.id == "claims/b1-8gpu-193" and o.scope_point is None


def test_malformed_claim_errors_and_counts(tmp_path):
    bench = {"id": "b", "metric": "decode_tokens_per_s_per_user"}
    claim = {"id": "c", "statement": "fast", "baseline": {}, "candidate": {}}  # no setup, no value, no speedup
    instance = SimpleNamespace(
        id="claims/c",
        kind="claims",
        name="c",
        scope_point=None,
        required=True,
        config={"benchmark": bench, "claim": claim},
    )
    o = runner.run(instance, context(tmp_path))
    assert (o.status, o.reason_code, o.required) == (Status.ERRORED, "error", True)
    assert (
        "no baseline setup is stated" in o.reason
        and "neither a candidate value, a speedup nor a difference" in o.reason
    )


def test_missing_config_errors_instead_of_crashing(tmp_path):
    instance = SimpleNamespace(id="claims/c", kind="claims", name="c", scope_point=None, required=True, config={})
    o = runner.run(instance, context(tmp_path))
    assert o.status is Status.ERRORED and "needs its benchmark and claim" in o.reason
