"""The evals and divergence runners as the engine calls them: run(instance, context) on a manifest."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

from fasttrack.evidence import Status
from fasttrack.kinds.context import RunContext
from fasttrack.kinds.divergence import run as divergence
from fasttrack.kinds.evals import run as evals
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import ScopePoint, load_manifest
from fasttrack.plan import CheckInstance
from support.eval_fakes import write_mrcr
from support.paths import SUPPORT

POINT = ScopePoint.of({"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1})

MANIFEST = """
fasttrack: 1
optimisation: {{id: fake-evals, title: fake evals}}
model: {{id: fasttrack/fake-evals, code_paths: ["model/*.py"]}}
switch: {{name: latency_specialized, default: false, enable: {{engine_arg: latency_specialized}}}}
scope:
  hardware:
    - {{accelerator: cpu, device_counts: [1], tensor_parallel: [1], interconnect: loopback}}
preserve: {{full_context: true, temperature_sampling: true, structured_output: true, stop_strings: true, n_samples: true, logprobs: true}}
target:
  kind: python
  python: {{factory: "eval_fakes:create", path: "{fakes}", options: {options}}}
evals:
  - id: mrcr
    task: mrcr_local
    task_dir: checks/evals/mrcr
    data_files: data/mrcr.jsonl
    metric: grade
    margin: 0.05
    alpha: 0.05
    limit: 300
    generation: {{temperature: 0.0, max_tokens: 64, seed: 5}}
    bins: {{field: n_chars, edges: [0, 2000, 4000]}}
divergence: {{prompts_from: mrcr, buckets: [0, 1024, 2048, 4096], max_prompts: 3}}
"""


@pytest.fixture()
def setup(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTTRACK_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "data").mkdir()
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "attention.py").write_text("# the model's code\n")
    write_mrcr(tmp_path / "data" / "mrcr.jsonl", 300)

    def make(options: str):
        path = tmp_path / "fasttrack.yaml"
        path.write_text(MANIFEST.format(fakes=SUPPORT.as_posix(), options=options))
        manifest = load_manifest(path)
        return manifest, RunContext(manifest, None, tmp_path, tmp_path / "artifacts", 120.0)

    return make


def instance(kind, name, config=None):
    return CheckInstance(
        f"{kind}/{name}@{POINT.id}", kind, name, POINT, True, True, None, None, None, 1.0, 120.0, config or {}
    )


def test_clean_candidate_passes_evals_and_divergence(setup):
    _manifest, context = setup("{}")
    out = evals.run(instance("evals", "mrcr"), context)
    assert out.status is Status.PASSED, out.reason
    assert out.measurements["n"] == 300 and [b["passed"] for b in out.measurements["bins"]] == [True, True]
    assert out.scope_point_id == POINT.id and out.duration_s > 0
    div = divergence.run(instance("divergence", "token_kl"), context)
    assert div.status is Status.PASSED, div.reason
    items = [a for a in out.artifacts if a.path.endswith("items.jsonl")]
    assert len(items) == 1 and len((Path(context.evidence_dir) / items[0].path).read_text().splitlines()) == 300
    again = evals.run(instance("evals", "mrcr"), context)  # second run: the baseline comes from the cache
    assert again.measurements["cache"]["baseline_hits"] == 300


def test_switch_only_bug_beyond_a_context_position_fails_long_bin_and_far_buckets(setup):
    _manifest, context = setup("{break_after_chars: 4000}")
    out = evals.run(instance("evals", "mrcr"), context)
    assert out.status is Status.FAILED and out.reason_code == "regression"
    short, long_ = out.measurements["bins"]
    assert short["passed"] and long_["status"] == "failed"
    div = divergence.run(instance("divergence", "token_kl"), context)
    buckets = {b["name"]: b for b in div.measurements["buckets"]}
    assert div.status is Status.FAILED
    assert buckets["0-1024"]["passed"] and buckets["1024-2048"]["passed"] and not buckets["2048-4096"]["passed"]


def test_eval_limit_override_reaches_the_runner_and_the_resume_digest(setup):
    from fasttrack.engine.select import inputs_digest
    from fasttrack.environment import detect_environment
    from fasttrack.manifest.overrides import with_eval_limits
    from fasttrack.plan import build_plan

    manifest, context = setup("{}")
    narrowed = with_eval_limits(manifest, (("mrcr", 40),))
    assert narrowed.evals[0].limit == 40 and narrowed.data["evals"][0]["limit"] == 300  # the file's record is unchanged
    env = detect_environment(accelerators=False, root=manifest.root)
    planned = {i.id: i for i in build_plan(narrowed, env, KINDS).instances if i.kind == "evals"}
    original = {i.id: i for i in build_plan(manifest, env, KINDS).instances if i.kind == "evals"}
    (eval_id,) = planned
    assert planned[eval_id].config["limit"] == 40
    assert inputs_digest("m", "c", planned[eval_id], "t") != inputs_digest("m", "c", original[eval_id], "t")
    # the engine hands its workers the overridden manifest (pickled), as here
    narrowed_context = RunContext(narrowed, None, context.evidence_dir, Path(context.evidence_dir) / "artifacts", 120.0)
    out = evals.run(planned[eval_id], narrowed_context)
    assert out.measurements["n"] == 40
    everything = with_eval_limits(manifest, (("mrcr", None),))
    assert everything.evals[0].limit is None


def test_an_underpowered_limited_eval_says_how_to_decide(setup):
    from fasttrack.manifest.overrides import with_eval_limits

    manifest, context = setup("{}")
    small = with_eval_limits(manifest, (("mrcr", 10),))
    small_context = RunContext(small, None, context.evidence_dir, Path(context.evidence_dir) / "artifacts", 120.0)
    out = evals.run(instance("evals", "mrcr"), small_context)
    assert out.status is Status.NOT_RUN and out.reason_code == "underpowered"
    assert out.reason.endswith("; to decide, lift the limit of 10: --eval-limit mrcr=all")
