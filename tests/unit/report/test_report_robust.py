"""Runners own their measurement shapes (docs/evidence.md lists what reporters read): whatever a
runner writes, every reporter renders instead of crashing, and shows "n/a" for what it cannot read."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fasttrack.kinds.registry import KINDS
from fasttrack.report.html import render_html
from fasttrack.report.junit import render_junit
from fasttrack.report.markdown import render_markdown
from support import evidence_fixtures

BASE = evidence_fixtures.build_evidence(samples=8).to_dict()
KEYS = [
    "tests",
    "samples",
    "bins",
    "flips",
    "diff",
    "ci_low",
    "ci_high",
    "margin",
    "labels",
    "claimed",
    "measured",
    "baseline",
    "candidate",
    "ratio",
    "ratio_ci",
    "kernel_census",
    "changed",
    "violations",
    "task",
    "metric",
    "n",
    "details",
    "probe",
    "p_value",
    "code_paths",
    "status",
    "statement",
    "claim_id",
    "tolerance",
    "worst_error",
    "nodeid",
    "outcome",
    "median",
    "name",
    "path",
    "hardware",
    "device_counts",
    "accelerator",
    "scope",
    "evals",
]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=6),
    max_leaves=24,
)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def render_everything(evidence) -> None:
    html = render_html(evidence, "0" * 64, kinds=KINDS)
    assert html.startswith("<!DOCTYPE html>")
    render_markdown(evidence, "0" * 64, kinds=KINDS)
    render_junit(evidence)


@SETTINGS
@given(st.integers(0, len(BASE["checks"]) - 1), st.dictionaries(st.sampled_from(KEYS), JSON, max_size=8))
def test_any_measurements_render(index, measurements):
    evidence = copy.deepcopy(BASE)
    evidence["checks"][index]["measurements"] = measurements
    render_everything(evidence)


@SETTINGS
@given(
    st.dictionaries(st.sampled_from(KEYS), JSON, max_size=6), st.dictionaries(st.sampled_from(KEYS), JSON, max_size=6)
)
def test_any_manifest_data_and_environment_render(data, environment):
    evidence = copy.deepcopy(BASE)
    evidence["manifest"]["data"] = data
    evidence["environment"] = environment
    render_everything(evidence)
