"""The sglang target: SGLang's launch command as the two server commands, the switch's variable per
side, per-side overrides, the data-parallel flag; the rules on what fasttrack sets itself and on
what an SGLang server cannot give the gate as declared (no /metrics without --enable-metrics, no
vLLM acceptance counters); a side started alone against a fake SGLang (health, build, stop); and
the plan's reason where SGLang is not installed."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

from fasttrack.environment import Environment
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import check_text, load_manifest
from fasttrack.plan import build_plan
from fasttrack.process.groups import group_alive
from fasttrack.targets.sglang.side import open_sglang, server_spec, unavailable

FAKE = Path(__file__).resolve().parents[2] / "fixtures" / "sglang_bench" / "fake"
CPU = Environment("cpu", (), "test", "loopback", "cpu", 2, "Linux", "3.11")

HEAD = """\
fasttrack: 1
optimisation: {id: s, title: s}
model: {id: org/m, code_paths: ["m/*.py"]}
switch:
  name: fast
  default: false
  enable: {env: FAKE_FAST=1}
  proof: {source: metrics, metric: "sglang:fake_steps_total", label: path}
scope:
  hardware:
    - {accelerator: cpu, device_counts: [1], tensor_parallel: [1]}
preserve: {full_context: true, temperature_sampling: true, structured_output: true}
"""

TARGET = """\
target:
  kind: sglang
  sglang:
    model_path: ckpt
    served_model_name: m
    server_args: [--tp-size, "{tensor_parallel}", --enable-metrics]
    env: {COMMON: "1"}
    baseline: {env: {BIND: "0"}, cpus: [0]}
    candidate: {env: {BIND: "1"}, server_args: [--extra]}
    startup_timeout_s: 60
"""


def manifest(tmp_path, target=TARGET, head=HEAD):
    path = tmp_path / "fasttrack.yaml"
    path.write_text(head + target)
    return load_manifest(path)


def messages(target: str, head: str = HEAD) -> list[str]:
    return [p.message for p in check_text(head + textwrap.dedent(target))[1] if p.severity == "error"]


def test_sides_are_sglang_launch_commands_with_the_switch_per_side(tmp_path):
    m = manifest(tmp_path)
    base = server_spec(m, "baseline", {"accelerator": "cpu", "tensor_parallel": 1})
    cand = server_spec(m, "candidate", {"accelerator": "cpu", "tensor_parallel": 1})
    assert base.command[:3] == (sys.executable, "-m", "sglang.launch_server")
    assert base.command[3:] == (
        "--model-path",
        "ckpt",
        "--served-model-name",
        "m",
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
        "--tp-size",
        "1",
        "--enable-metrics",
    )
    assert cand.command == (*base.command, "--extra")
    assert base.env == {"COMMON": "1", "BIND": "0"} and "FAKE_FAST" in base.unset_env
    assert cand.env == {"COMMON": "1", "BIND": "1", "FAKE_FAST": "1"}
    assert base.health_path == "/health" and base.startup_timeout_s == 60
    assert base.cpus == (0,) and cand.cpus == ()
    assert m.target.serves_http and m.target.openai.model_name == "m"


def test_an_interpreter_of_its_own_and_data_parallel_degrees(tmp_path):
    head = HEAD.replace("tensor_parallel: [1]}", "tensor_parallel: [1]}\n  parallelism: {data: [1, 2]}")
    m = manifest(
        tmp_path, TARGET.replace("model_path: ckpt", "model_path: ckpt\n    python: /opt/sgl/bin/python"), head
    )
    spec = server_spec(m, "baseline", {"accelerator": "cpu", "tensor_parallel": 1, "data_parallel": 2})
    assert spec.command[0] == "/opt/sgl/bin/python" and spec.command[-2:] == ("--dp-size", "2")
    assert unavailable(m).needs == "/opt/sgl/bin/python"  # no such interpreter here
    # the served name defaults to the model path (passed explicitly: requests and server agree)
    plain = manifest(tmp_path, TARGET.replace("    served_model_name: m\n", ""))
    assert plain.target.openai.model_name == "ckpt"
    assert "--served-model-name" in server_spec(plain, "baseline", {"tensor_parallel": 1}).command


def test_flags_fasttrack_sets_and_what_sglang_cannot_serve_are_errors():
    found = messages(
        TARGET.replace(
            '[--tp-size, "{tensor_parallel}", --enable-metrics]', "[--enable-metrics, --port, '8000', --model-path=x]"
        )
    )
    assert sum("is set by fasttrack" in m for m in found) == 2
    found = messages(TARGET.replace('baseline: {env: {BIND: "0"}', 'baseline: {env: {FAKE_FAST: "1"}'))
    assert any("turns the switch 'fast' on" in m for m in found)
    found = messages(TARGET.replace(", --enable-metrics]", "]"))
    assert any("SGLang serves only with --enable-metrics" in m for m in found)
    spec = HEAD.replace(
        "  hardware:", "  speculative: {method: eagle, draft_lengths: [3], acceptance: measured}\n  hardware:"
    )
    assert any("cannot run draft lengths yet" in m for m in messages(TARGET, spec))
    forced = TARGET.replace('env: {COMMON: "1"}', 'env: {COMMON: "1", SGLANG_SIMULATE_ACC_LEN: "3.2"}')
    assert any("forces synthetic acceptance" in m for m in messages(forced, spec))
    several = HEAD.replace("  hardware:", "  models: [org/a, org/b]\n  hardware:")
    found = messages(TARGET.replace("model_path: ckpt\n    served_model_name: m\n", 'model_path: "{model}"\n'), several)
    assert any("give served_model_name" in m for m in found)
    assert messages(TARGET) == []


def test_a_side_started_alone_waits_for_health_records_the_build_and_stops(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE), os.environ.get("PYTHONPATH", "")]))
    m = manifest(tmp_path)
    side = open_sglang(m, "candidate", {"tensor_parallel": 1}, None, tmp_path / "logs")
    try:
        build = json.loads((tmp_path / "logs" / "engine-build.candidate.json").read_text())
        assert build["version"] == "0.5.2" and build["source"].endswith("/get_server_info")
        assert side.kind == "sglang" and side.profiler is None  # no SGLANG_TORCH_PROFILER_DIR: no census
        assert side.target.generate([{"prompt": "hi", "max_tokens": 4}])[0]["text"] == " ok"
        pid = side.server.process.pid
    finally:
        side.close()
    assert not group_alive(pid)
    log = (tmp_path / "logs" / "server-candidate.log").read_text()
    assert "fake sglang 0.5.2 serving m on 127.0.0.1" in log and "fast=True" in log


def test_without_sglang_the_plan_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(FAKE)])
    sys.modules.pop("sglang", None)
    m = manifest(tmp_path)
    assert "pip install sglang" in unavailable(m).reason
    plan = build_plan(m, CPU, KINDS)
    driving = [i for i in plan.instances if i.kind == "switch"]
    assert driving and all(i.reason_code == "target" and "SGLang is not installed" in i.reason for i in driving)
    monkeypatch.syspath_prepend(str(FAKE))  # installed: one shared server per side, as for vllm
    plan = build_plan(m, CPU, KINDS)
    assert all(i.runnable for i in plan.instances if i.kind == "switch")
    assert [(s.side, s.draft_length) for s in plan.servers] == [("baseline", None), ("candidate", None)]
    assert "switch fast" in plan.servers[0].checks
