"""Several checkpoints under one optimisation (``scope.models``: the dimension ``model``) and data
parallelism (``scope.parallelism.data``: ``data_parallel``) are deployment dimensions: a scope point
and a pair of servers per checkpoint and degree; a vllm target's servers get the point's checkpoint
and ``--data-parallel-size``; an in-process factory gets ``model=`` and ``data_parallel=``."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from fasttrack.environment import Environment, detect_environment
from fasttrack.errors import TargetError
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import check_text, load_manifest
from fasttrack.plan import build_plan, render_plan_table
from fasttrack.targets.pool import spec_key
from fasttrack.targets.python.factory import factory_options
from fasttrack.targets.vllm.side import server_spec

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures/manifests"
CPU = Environment("cpu", (), "test", "loopback", "cpu", 2, "Linux", "3.11")


def load(tmp_path, name="several-checkpoints.yaml", text=None):
    path = tmp_path / "fasttrack.yaml"
    if text is None:
        shutil.copy(FIXTURES / "valid" / name, path)
    else:
        path.write_text(textwrap.dedent(text))
    (tmp_path / ".git").mkdir(exist_ok=True)
    return load_manifest(path)


def test_each_checkpoint_and_data_parallel_degree_is_a_deployment(tmp_path):
    m = load(tmp_path)
    ids = [p.id for p in m.deployments()]
    assert len(ids) == 4
    assert "accelerator=NVIDIA H200,data_parallel=2,device_count=8,model=org/moe-b-nvfp4,tensor_parallel=4" in ids
    assert m.scope.deployment_dimensions()[-2:] == ("model", "data_parallel")


def test_servers_per_checkpoint_with_the_data_parallel_size(tmp_path):
    m = load(tmp_path)
    keys = set()
    for point in m.deployments():
        values = point.as_dict()
        for side in ("baseline", "candidate"):
            spec = server_spec(m, side, values)
            command = list(spec.command)
            assert values["model"] in command and "{model}" not in command
            assert command[command.index("--data-parallel-size") + 1] == str(values["data_parallel"])
            keys.add(spec_key(spec))
    assert len(keys) == 8  # a pair per checkpoint and degree


def test_benchmark_points_narrow_to_one_checkpoint(tmp_path):
    m = load(tmp_path)
    plan = build_plan(m, detect_environment(), KINDS)
    points = {i.scope_point.get("model") for i in plan.instances if i.kind == "benchmarks"}
    assert points == {"org/moe-a-fp8"}
    switch = {i.scope_point.get("model") for i in plan.instances if i.kind == "switch"}
    assert switch == {"org/moe-a-fp8", "org/moe-b-nvfp4"}  # the proof of path at every checkpoint


def test_the_plan_names_each_checkpoints_servers(tmp_path):
    plan = build_plan(load(tmp_path, "negative-scope.yaml"), CPU, KINDS)
    if not plan.servers:
        pytest.skip("vLLM is not installed here: the plan lists no servers")
    text = render_plan_table(plan)
    assert "[cpu tp1 model=org/moe-a] baseline" in text and "[cpu tp1 model=org/moe-b] candidate" in text


PYTHON = """\
fasttrack: 1
optimisation: {id: p, title: p}
model: {id: org/p, code_paths: ["p/*.py"]}
switch: {name: fast, default: false, enable: {engine_arg: fast}, proof: {source: inprocess}}
scope:
  hardware: [{accelerator: cpu, device_counts: [1], tensor_parallel: [1]}]
  models: [org/p-a, org/p-b]
  parallelism: {data: [1, 2]}
preserve: {full_context: true, temperature_sampling: true, structured_output: true}
target: {kind: python, python: {factory: "p.target:create"}}
"""


def test_an_in_process_factory_is_given_the_checkpoint_and_the_degree(tmp_path):
    m = load(tmp_path, text=PYTHON)

    def takes_both(model: str, data_parallel: int = 1, fast: bool = False): ...

    def takes_neither(fast: bool = False): ...

    point = {"accelerator": "cpu", "model": "org/p-b", "data_parallel": 2}
    options = factory_options(m, "candidate", point, factory=takes_both)
    assert options["model"] == "org/p-b" and options["data_parallel"] == 2 and options["fast"] is True
    with pytest.raises(TargetError, match="takes no 'model' argument"):
        factory_options(m, "candidate", point, factory=takes_neither)
    # a degree of 1 is no data parallelism: a factory that does not take it still runs it
    assert "data_parallel" not in factory_options(
        m, "candidate", {**point, "data_parallel": 1}, factory=lambda model, fast=False: None
    )


def test_a_point_outside_the_checkpoints_is_an_error():
    text = PYTHON + "benchmarks:\n  - {id: d, metric: tpot_ms, points: {model: [org/p-c]}}\n"
    errors = [p.message for p in check_text(text)[1] if p.severity == "error"]
    assert any("model 'org/p-c' is not in the scope" in e for e in errors)
