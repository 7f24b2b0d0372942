"""Rival arms beside a benchmark's own server settings (they meet in server planning): each arm's candidate
is a server of its own, and a benchmark's ``setups.<side>.engine_args`` one more pair for every
arm, the stock servers shared by the arms; a benchmark's engine_args cannot set the arms' option;
a refused combination is tried once per arm."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from fasttrack.engine.servers import point_manifests, point_specs
from fasttrack.environment import Environment
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import check_text, load_manifest
from fasttrack.plan import build_plan
from fasttrack.plan.servers import shared_servers
from fasttrack.targets.registry import TARGET_KINDS

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures/manifests/valid/option-arms.yaml"
CPU = Environment("cpu", (), "test", "loopback", "Test CPU", 2, "Linux", "3.11")
POINT = {"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1}
WIDE = """  - id: decode-wide
    metric: decode_tokens_per_s
    setups:
      baseline: {switch: false, engine_args: [--max-num-seqs, "64"]}
      candidate: {switch: true, engine_args: ARGS}
"""


def with_wide(args: str = '[--max-num-seqs, "64"]') -> str:
    text = FIXTURE.read_text()
    return text.replace("benchmarks:\n", "benchmarks:\n" + WIDE.replace("ARGS", args), 1)


def manifest(tmp_path):
    (tmp_path / "fasttrack.yaml").write_text(with_wide())
    (tmp_path / ".git").mkdir()
    return load_manifest(tmp_path / "fasttrack.yaml")


def test_each_arm_has_a_candidate_with_the_benchmarks_own_args_and_the_stock_servers_are_shared(tmp_path):
    m = manifest(tmp_path)
    plan = build_plan(m, CPU, KINDS)
    runnable = [replace(i, runnable=True) for i in plan.instances]  # vLLM need not be installed here
    drives = {name for name, kind in KINDS.items() if kind.execution.drives_target}
    servers = shared_servers(m, runnable, drives, TARGET_KINDS["vllm"])
    wide = ("--max-num-seqs", "64")
    assert sorted((s.side, s.arm or "", s.engine_args) for s in servers) == [
        ("baseline", "", ()),
        ("baseline", "", wide),
        *(("candidate", arm, args) for arm in m.rival_arms for args in ((), wide)),
    ]
    stock = next(s for s in servers if s.side == "baseline" and s.engine_args == wide)
    assert {c for c in stock.checks} == {f"benchmarks decode-wide~{arm}" for arm in m.rival_arms}
    assert all(s.to_dict()["arm"] == s.arm for s in servers if s.arm)


def test_the_pool_starts_an_arms_candidate_with_the_option_and_the_benchmarks_args(tmp_path):
    m = manifest(tmp_path)
    plan = build_plan(m, CPU, KINDS)
    driving = [i for i in plan.instances if KINDS[i.kind].execution.drives_target]
    (manifests,) = point_manifests(m, driving).values()
    specs = point_specs(TARGET_KINDS["vllm"].shared_server, manifests.values(), POINT)
    commands = sorted((s.name, " ".join(s.command[-4:])) for s in specs)
    assert len(commands) == 6  # stock plain and wide; each of two arms plain and wide
    wide = [c for c in commands if "--max-num-seqs 64" in c[1]]
    assert len(wide) == 3
    assert any("--moe-backend mega_cutedsl" in c for _side, c in wide)
    assert any("--moe-backend mega_trtllm" in c for _side, c in wide)
    assert any("--moe-backend cutlass" in c for side, c in wide if side == "baseline")


def test_a_benchmarks_engine_args_cannot_set_the_arms_option():
    _, problems = check_text(with_wide("[--moe-backend=triton]"))
    found = [p.message for p in problems if p.severity == "error"]
    assert any("--moe-backend" in message and "option of the switch" in message for message in found), found


def test_a_refused_combination_of_a_switch_with_arms_is_tried_once_per_arm_with_that_arms_value(tmp_path):
    from fasttrack.kinds.refused.run import candidate_spec

    proof = '  proof: {source: metrics, metric: "vllm:moe_backend_calls_total", label: backend}\n'
    refused = '  refused:\n    - {id: eplb, serve_args: [--enable-eplb], message: "EPLB is not supported"}\n'
    text = FIXTURE.read_text()
    assert proof in text
    (tmp_path / "fasttrack.yaml").write_text(text.replace(proof, proof + refused, 1))
    (tmp_path / ".git").mkdir()
    m = load_manifest(tmp_path / "fasttrack.yaml")
    plan = build_plan(m, CPU, KINDS)
    tried = {i.name: i for i in plan.instances if i.kind == "refused"}
    assert sorted(tried) == [f"eplb~{arm}" for arm in m.rival_arms]
    for arm in m.rival_arms:
        instance = tried[f"eplb~{arm}"]
        spec = candidate_spec(m.for_config(instance.config), dict(instance.config), POINT)
        assert "--enable-eplb" in spec.command
        assert " ".join(spec.command).endswith(f"--moe-backend {arm}")


def test_a_check_with_a_server_of_its_own_is_left_out_of_the_shared_servers_by_plan_and_pool_alike(tmp_path):
    """The plan's servers and the engine's pool ask one predicate, `uses_shared_servers`: a refused
    combination starts its own server and never takes a place on the run's shared ones."""
    from fasttrack.engine.servers import RunServers
    from fasttrack.plan.servers import OWN_SERVER, uses_shared_servers

    proof = '  proof: {source: metrics, metric: "vllm:moe_backend_calls_total", label: backend}\n'
    refused = '  refused:\n    - {id: eplb, serve_args: [--enable-eplb], message: "EPLB is not supported"}\n'
    (tmp_path / "fasttrack.yaml").write_text(FIXTURE.read_text().replace(proof, proof + refused, 1))
    (tmp_path / ".git").mkdir()
    m = load_manifest(tmp_path / "fasttrack.yaml")
    runnable = [replace(i, runnable=True) for i in build_plan(m, CPU, KINDS).instances]
    drives = {name for name, kind in KINDS.items() if kind.execution.drives_target}
    tried = [i for i in runnable if i.kind == "refused"]
    assert tried and all((i.config or {}).get(OWN_SERVER) for i in tried)
    assert "refused" in drives and not any(uses_shared_servers(i, drives) for i in tried)
    served = {c for s in shared_servers(m, runnable, drives, TARGET_KINDS["vllm"]) for c in s.checks}
    assert served and not any(c.startswith("refused ") for c in served)
    pool = RunServers(m, KINDS, tried, tmp_path / "servers", lambda _line: None)
    try:
        assert pool.driving == []  # nothing to start for them
    finally:
        pool.close()
