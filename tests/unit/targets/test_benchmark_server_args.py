"""A benchmark's own server settings (``setups.<side>.engine_args``) reach its servers: one pair
per distinct setting, shared by the benchmarks that agree, the point's plain pair for the rest;
and the engine's bookkeeping stops a benchmark's own servers once its last check is done."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from fasttrack.engine import servers as run_servers
from fasttrack.environment import detect_environment
from fasttrack.errors import TargetError
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.manifest.sections import OpenAISide
from fasttrack.plan import build_plan, render_plan_table
from fasttrack.targets.openai.side import server_spec as openai_spec
from fasttrack.targets.pool import spec_key
from fasttrack.targets.vllm.side import server_spec

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures/manifests/valid/benchmark-engine-args.yaml"
POINT = {"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1}


def fixture(tmp_path):
    shutil.copy(FIXTURE, tmp_path / "fasttrack.yaml")
    (tmp_path / ".git").mkdir()
    return load_manifest(tmp_path / "fasttrack.yaml")


def instances(m, name):
    plan = build_plan(m, detect_environment(), KINDS)
    return [i for i in plan.instances if i.kind == "benchmarks" and i.name == name]


def test_a_benchmarks_engine_args_start_servers_of_its_own(tmp_path):
    m = fixture(tmp_path)
    wide = instances(m, "decode-wide")[0]
    assert wide.config["engine_args"] == {"baseline": ["--max-num-seqs", "64"], "candidate": ["--max-num-seqs", "64"]}
    assert "engine_args" not in instances(m, "decode-one")[0].config
    own = m.for_config(wide.config)
    for side in ("baseline", "candidate"):
        plain, mine = server_spec(m, side, POINT), server_spec(own, side, POINT)
        assert mine.command[-2:] == ("--max-num-seqs", "64") and "--max-num-seqs" not in plain.command
        assert spec_key(plain) != spec_key(mine)
    # the benchmark that agrees asks for the very same servers
    latency = m.for_config(instances(m, "latency-wide")[0].config)
    assert spec_key(server_spec(latency, "candidate", POINT)) == spec_key(server_spec(own, "candidate", POINT))
    assert own.for_config(None) is own


def test_the_plan_lists_one_pair_per_distinct_setting(tmp_path):
    m = fixture(tmp_path)
    plan = build_plan(m, detect_environment(), KINDS)
    if not any(i.runnable for i in plan.instances if i.kind == "benchmarks"):
        pytest.skip("vLLM is not installed here: the plan lists no servers")
    by_args = {}
    for server in plan.servers:
        by_args.setdefault(server.engine_args, []).append(server)
    assert {len(v) for v in by_args.values()} == {2}  # a pair each
    own = by_args[("--max-num-seqs", "64")]
    assert {c for s in own for c in s.checks} == {"benchmarks decode-wide", "benchmarks latency-wide"}
    assert "benchmarks decode-one" in by_args[()][0].checks
    text = render_plan_table(plan)
    assert (
        "[cpu tp1 with --max-num-seqs 64] candidate: 2 check(s): benchmarks decode-wide, benchmarks latency-wide"
        in text
    )


def test_a_server_at_a_url_cannot_be_given_engine_args(tmp_path):
    m = fixture(tmp_path)
    urls = replace(m.target.openai, baseline=OpenAISide(url="http://127.0.0.1:1"))
    bad = replace(m, target=replace(m.target, kind="openai", openai=urls), side_args={"baseline": ("--x",)})
    with pytest.raises(TargetError, match="need fasttrack to start the baseline server"):
        openai_spec(bad, "baseline", POINT)


class FakePool:
    def __init__(self, folder):
        self.released: list[set] = []
        self.live: set = set()

    def prestart(self, specs):
        self.live |= {spec_key(s) for s in specs}

    def release(self, keep):
        gone = {k for k in self.live if not keep(k)}
        self.live -= gone
        self.released.append(gone)
        return [f"stopped {len(gone)}"] if gone else []


class FakeService:
    def __init__(self, pool):
        pass

    def env(self):
        return {}

    def close(self):
        pass


def test_a_benchmarks_own_servers_stop_with_its_last_check(tmp_path, monkeypatch):
    monkeypatch.setattr(run_servers, "ServerPool", FakePool)
    monkeypatch.setattr(run_servers, "PoolService", FakeService)
    m = fixture(tmp_path)
    plan = build_plan(m, detect_environment(), KINDS)
    wide, latency, one = (instances(m, n)[0] for n in ("decode-wide", "latency-wide", "decode-one"))
    servers = run_servers.RunServers(m, KINDS, [wide, latency, one], tmp_path, lambda line: None)
    own = {spec_key(server_spec(m.for_config(wide.config), s, POINT)) for s in ("baseline", "candidate")}
    plain = {spec_key(server_spec(m, s, POINT)) for s in ("baseline", "candidate")}
    servers.pool.live |= own | plain
    servers.done(wide)  # latency-wide still needs the same pair
    assert own <= servers.pool.live
    servers.done(latency)
    assert not own & servers.pool.live and plain <= servers.pool.live
    servers.done(one)
    assert servers.pool.live == set()
    assert plan is not None
