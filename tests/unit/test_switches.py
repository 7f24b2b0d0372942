"""Several switches: how each side turns them on (factory keywords, environment, server flags),
ablation arms (one switch on), the proof of path per switch, and the plan's ablation instances."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from fasttrack.environment import Environment
from fasttrack.kinds.context import RunContext
from fasttrack.kinds.registry import KINDS
from fasttrack.kinds.switch import run as switch_runner
from fasttrack.manifest import load_manifest
from fasttrack.plan import build_plan
from fasttrack.targets.openai.side import server_spec
from fasttrack.targets.python.env import EnvScope
from fasttrack.targets.python.factory import factory_options
from fasttrack.targets.sides import open_side

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures/manifests/valid"
B300_TP4 = {"accelerator": "NVIDIA B300", "device_count": 4, "tensor_parallel": 4}

HEAD = """\
fasttrack: 1
optimisation: {id: sw, title: switches}
model: {id: org/m, code_paths: ["m/*.py"]}
switches:
  - {name: alpha, default: false, enable: {engine_arg: alpha}, proof: {source: inprocess, label: opt}}
  - {name: beta, default: false, enable: {env: "SW_BETA=on"}, proof: {source: inprocess, label: opt}}
  - name: gamma
    default: false
    enable: {engine_arg: gamma}
    proof: {source: inprocess, label: opt}
    points: {tensor_parallel: [2]}
scope:
  hardware:
    - {accelerator: cpu, device_counts: [1], tensor_parallel: [1, 2]}
  batch: {min: 1, max: 3, points: [1, 3]}
preserve: {full_context: true, temperature_sampling: true, structured_output: true}
target:
  kind: python
  python: {factory: "sw_target:create", path: "."}
"""

# A target that counts decode steps per optimisation it runs; each optimisation is turned on by
# its keyword, except beta, which the target reads from its environment when it is created.
TARGET = """
import os

class Target:
    def __init__(self, alpha=False, gamma=False, tensor_parallel_size=1, broken=(), default_on=()):
        self.on = {"alpha": alpha, "beta": os.environ.get("SW_BETA") == "on",
                   "gamma": gamma and tensor_parallel_size > 1}
        for name in default_on:
            self.on[name] = True
        for name in broken:
            self.on[name] = False
        self.steps = {}
        self.path = {}
        self.env_at_call = []

    def generate(self, requests):
        self.env_at_call.append(os.environ.get("SW_BETA"))
        tokens = max(r.get("max_tokens", 1) for r in requests)
        for name, on in self.on.items():
            if on:
                self.steps[name] = self.steps.get(name, 0) + tokens
        key = "opt" if any(self.on.values()) else "stock"
        self.path[key] = self.path.get(key, 0) + tokens
        return [{"text": "ok"} for _ in requests]

    def path_report(self):
        return {"decode_steps_by_path": dict(self.path), "decode_steps_by_opt": dict(self.steps)}

def create(**options):
    return Target(**options)
"""


def manifest(tmp_path: Path, options: str = ""):
    (tmp_path / "sw_target.py").write_text(textwrap.dedent(TARGET))
    text = HEAD.replace('path: "."}', f'path: ".", options: {{{options}}}}}') if options else HEAD
    (tmp_path / "fasttrack.yaml").write_text(text)
    sys.modules.pop("sw_target", None)
    return load_manifest(tmp_path / "fasttrack.yaml")


def test_the_candidate_turns_every_switch_on_and_an_arm_only_its_own(tmp_path):
    m = manifest(tmp_path)
    point = {"accelerator": "cpu", "device_count": 1, "tensor_parallel": 2}
    assert factory_options(m, "baseline", point) | {"tensor_parallel_size": 2} == {
        "alpha": False,
        "gamma": False,
        "tensor_parallel_size": 2,
        "device": "cpu",  # a cpu point: the factory is told so
    }
    assert factory_options(m, "candidate", point)["alpha"] is True
    arm = m.for_arm(["gamma"])
    assert (factory_options(arm, "candidate", point)["alpha"], factory_options(arm, "candidate", point)["gamma"]) == (
        False,
        True,
    )
    with pytest.raises(ValueError, match="unknown switch"):
        m.for_arm(["delta"])


def test_an_environment_switch_is_set_around_the_candidate_and_removed_around_the_baseline(tmp_path, monkeypatch):
    monkeypatch.setenv("SW_BETA", "on")  # the gate's own environment must not turn the baseline's switch on
    m = manifest(tmp_path)
    point = {"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1}
    baseline = open_side(m, "baseline", point).target
    candidate = open_side(m, "candidate", point).target
    assert baseline.on["beta"] is False and candidate.on["beta"] is True  # read when created
    baseline.generate([{"prompt": "x"}])
    candidate.generate([{"prompt": "x"}])
    assert baseline.env_at_call == [None] and candidate.env_at_call == ["on"]  # and around every call
    assert os.environ["SW_BETA"] == "on"  # restored afterwards
    arm = open_side(m.for_arm(["alpha"]), "candidate", point).target
    assert arm.on == {"alpha": True, "beta": False, "gamma": False}


def test_env_scope_restores_what_was_there():
    os.environ.pop("SW_X", None)
    os.environ["SW_Y"] = "keep"
    with EnvScope({"SW_X": "1"}, ["SW_Y"]):
        assert os.environ["SW_X"] == "1" and "SW_Y" not in os.environ
    assert "SW_X" not in os.environ and os.environ.pop("SW_Y") == "keep"


def test_a_server_gets_its_env_switches_and_an_arm_drops_the_other_flags():
    m = load_manifest(FIXTURES / "switches-ablation.yaml")
    candidate = server_spec(m, "candidate", B300_TP4)
    assert candidate.env == {"TINY_TWO_STREAM": "1", "TINY_LAUNCH_ELISION": "1"} and candidate.unset_env == ()
    assert "--fused-router" in candidate.command
    baseline = server_spec(m, "baseline", B300_TP4)
    # the explicit off value stays; the other switch's variable is removed from the inherited environment
    assert baseline.env == {"TINY_TWO_STREAM": "0"} and baseline.unset_env == ("TINY_LAUNCH_ELISION",)
    arm = server_spec(m.for_arm(["two_stream"]), "candidate", B300_TP4)
    assert arm.env == {"TINY_TWO_STREAM": "1"} and arm.unset_env == ("TINY_LAUNCH_ELISION",)
    assert "--fused-router" not in arm.command


def run_switch_check(m, tp: int, tmp_path: Path):
    plan = build_plan(m, Environment("cpu", (), "test", "loopback", "cpu", 2, "Linux", "3.11"), KINDS)
    instance = next(i for i in plan.instances if i.kind == "switch" and i.scope_point.get("tensor_parallel") == tp)
    assert instance.name == "switches"
    context = RunContext(m, None, tmp_path, tmp_path / "a", 60.0)
    return switch_runner.run(instance, context)


def test_every_switch_must_run_where_it_has_an_effect(tmp_path):
    m = manifest(tmp_path)
    tp1, tp2 = run_switch_check(m, 1, tmp_path), run_switch_check(m, 2, tmp_path)
    assert tp1.status.value == tp2.status.value == "passed", (tp1.reason, tp2.reason)
    assert tp1.measurements["switches"]["gamma"]["applies"] is False  # points: tensor_parallel 2 only
    assert tp2.measurements["switches"]["gamma"]["candidate_steps"] > 0


def test_a_switch_that_never_runs_fails_and_is_named(tmp_path):
    outcome = run_switch_check(manifest(tmp_path, "broken: [beta]"), 1, tmp_path)
    assert outcome.status.value == "failed" and outcome.reason_code == "path_not_exercised"
    assert outcome.reason.startswith("with beta on, the optimised path 'beta' never ran at batch 1, 3")
    assert outcome.reason.count("never ran") == 1  # only beta: alpha ran (its steps are listed as seen)


def test_a_switch_on_by_default_fails(tmp_path):
    outcome = run_switch_check(manifest(tmp_path, "default_on: [alpha]"), 1, tmp_path)
    assert outcome.status.value == "failed" and outcome.reason_code == "switch_default_on"
    assert "the alpha switch must be off by default" in outcome.reason


def test_the_plan_runs_each_switch_alone_where_the_ablation_says():
    m = load_manifest(FIXTURES / "switches-ablation.yaml")
    plan = build_plan(m, Environment("cpu", (), "test", "loopback", "cpu", 2, "Linux", "3.11"), KINDS)
    arms = [i for i in plan.instances if "~" in i.name]
    # fused_router acts only at TP 2 (its points), outside the ablation's TP 4: no arm for it
    assert sorted({i.name for i in arms}) == ["decode~launch_elision", "decode~two_stream"]
    assert {i.scope_point.get("tensor_parallel") for i in arms} == {4}  # ablation points
    assert {i.scope_point.get("batch") for i in arms} == {1, 8}
    assert all(i.kind == "benchmarks" and not i.required and "claims" not in i.config for i in arms)
    assert {tuple(i.config["arm"]) for i in arms} == {("two_stream",), ("launch_elision",)}
    full = [i for i in plan.instances if i.name == "decode"]
    assert len(full) == 4 and all(i.required for i in full)  # all switches on: both TP sizes, required


def test_leave_one_out_arms_turn_off_one_switch_each_with_the_others_on():
    m = load_manifest(FIXTURES / "switches-ablation-leave-one-out.yaml")
    plan = build_plan(m, Environment("cpu", (), "test", "loopback", "cpu", 2, "Linux", "3.11"), KINDS)
    arms = {i.name: tuple(i.config["arm"]) for i in plan.instances if "~" in i.name}
    # fused_router acts only at TP 2, outside the ablation's TP 4: leaving it out there changes nothing
    assert arms == {
        "decode~two_stream": ("two_stream",),
        "decode~launch_elision": ("launch_elision",),
        "decode~-two_stream": ("launch_elision", "fused_router"),
        "decode~-launch_elision": ("two_stream", "fused_router"),
    }
    arm = server_spec(m.for_arm(list(arms["decode~-two_stream"])), "candidate", B300_TP4)
    assert arm.env == {"TINY_LAUNCH_ELISION": "1"} and "TINY_TWO_STREAM" in arm.unset_env
    assert "--fused-router" in arm.command
