"""The vllm target: a vLLM serving config as the two server commands (module form where the
console script cannot run), the switch's variable per side, the draft length's
--speculative-config, a metrics folder per server, the rules on what fasttrack sets itself, and
the plan's shared servers."""

from __future__ import annotations

import json
import sys
import textwrap

from fasttrack.environment import detect_environment
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import check_text, load_manifest
from fasttrack.manifest.vllm_serve import MODULE
from fasttrack.plan import build_plan
from fasttrack.targets.vllm.side import METRICS_DIR_ENV, server_spec

HEAD = """\
fasttrack: 1
optimisation: {id: v, title: v}
model: {id: org/m, code_paths: ["m/*.py"]}
switch:
  name: fast
  default: false
  enable: {env: FAST=1}
  proof: {source: metrics, metric: steps_total, label: path}
scope:
  hardware:
    - {accelerator: cpu, device_counts: [1], tensor_parallel: [1]}
  batch: {min: 1, max: 4, points: [1, 4]}
  speculative: {method: ngram, draft_lengths: [3], acceptance: measured}
preserve: {full_context: true, temperature_sampling: true, structured_output: true}
"""

TARGET = """\
target:
  kind: vllm
  vllm:
    model: ckpt
    served_model_name: m
    serve_args: [--dtype, float32]
    env: {COMMON: "1"}
    baseline: {env: {BIND: "0"}, cpus: [0]}
    candidate: {env: {BIND: "1"}, serve_args: [--extra]}
    speculative_config: {method: ngram, prompt_lookup_max: 3}
"""


def manifest(tmp_path, target=TARGET, extra=""):
    path = tmp_path / "fasttrack.yaml"
    path.write_text(HEAD + target + textwrap.dedent(extra))
    return load_manifest(path)


def messages(target: str) -> list[str]:
    return [p.message for p in check_text(HEAD + target)[1] if p.severity == "error"]


def test_sides_are_vllm_servers_in_module_form_with_the_switch_per_side(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `vllm` program: the module form
    m = manifest(tmp_path)
    base = server_spec(m, "baseline", {"accelerator": "cpu"})
    cand = server_spec(m, "candidate", {"accelerator": "cpu"}, draft_length=3)
    assert base.command[:5] == (sys.executable, "-m", MODULE, "--model", "ckpt")
    assert base.command[5:] == ("--served-model-name", "m", "--port", "{port}", "--dtype", "float32")
    assert "--extra" in cand.command and "--extra" not in base.command
    assert base.env == {"COMMON": "1", "BIND": "0"} and "FAST" in base.unset_env
    assert cand.env == {"COMMON": "1", "BIND": "1", "FAST": "1"}
    spec_json = json.loads(cand.command[cand.command.index("--speculative-config") + 1])
    assert spec_json == {"num_speculative_tokens": 3, "method": "ngram", "prompt_lookup_max": 3}
    assert "--speculative-config" not in base.command
    assert base.fresh_dirs == (METRICS_DIR_ENV,) == cand.fresh_dirs
    assert base.cpus == (0,) and cand.cpus == ()  # each side's own CPUs; none: the OS's choice
    assert m.target.serves_http and m.target.openai.model_name == "m"


def test_flags_fasttrack_sets_and_a_baseline_that_turns_the_switch_on_are_errors():
    found = messages(TARGET.replace("[--dtype, float32]", "[--port, '8000', --model=x]"))
    assert sum("is set by fasttrack" in m for m in found) == 2
    found = messages(TARGET.replace('baseline: {env: {BIND: "0"}', 'baseline: {env: {FAST: "1"}'))
    assert any("turns the switch 'fast' on" in m for m in found)
    found = messages(TARGET.replace("    speculative_config: {method: ngram, prompt_lookup_max: 3}\n", ""))
    assert any("could not run them" in m for m in found)
    assert messages(TARGET) == []


def test_plan_shows_one_server_per_side_per_point_and_the_draft_server(tmp_path):
    m = manifest(
        tmp_path,
        extra="""\
        features:
          full_context: {}
          temperature_sampling: {samples: 50}
          structured_output: {schemas: ["checks/features/schemas/person.json"]}
        """,
    )
    plan = build_plan(m, detect_environment(), KINDS)
    servers = [(s.side, s.draft_length) for s in plan.servers]
    # speculative decoding judges the candidate's acceptance against stock's at the same draft
    # length: a drafting server per side, as the engine's pool starts them
    assert servers == [("baseline", None), ("candidate", None), ("baseline", 3), ("candidate", 3)]
    shared = plan.servers[0].checks
    assert "switch fast" in shared and "features full_context" in shared
    assert plan.servers[2].checks == plan.servers[3].checks == ["speculative ngram"]


def test_speculative_env_reaches_both_drafting_servers_only_and_switches_still_win(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    target = TARGET + '    speculative_env: {VLLM_ENABLE_V1_MULTIPROCESSING: "0", FAST: "0"}\n'
    m = manifest(tmp_path, target)
    point = {"accelerator": "cpu"}
    for side in ("baseline", "candidate"):
        assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in server_spec(m, side, point).env  # the main pair
        assert server_spec(m, side, point, draft_length=3).env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    # the switch's variable is the gate's: on for the candidate's drafting server whatever the env says
    assert server_spec(m, "candidate", point, draft_length=3).env["FAST"] == "1"
    assert messages(target) == []


def test_speculative_env_without_draft_lengths_is_a_warning():
    target = TARGET.replace("    speculative_config: {method: ngram, prompt_lookup_max: 3}\n", "")
    text = HEAD.replace("  speculative: {method: ngram, draft_lengths: [3], acceptance: measured}\n", "") + target
    text += '    speculative_env: {VLLM_ENABLE_V1_MULTIPROCESSING: "0"}\n'
    problems = check_text(text)[1]
    assert [p.message for p in problems if p.severity == "error"] == []
    assert any("no server is started with it" in p.message for p in problems if p.severity == "warning")
