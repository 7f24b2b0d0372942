"""The next point's servers start as soon as the first point's answer (`RunServers._start_next`),
so that they are up when that point's checks begin. On the vLLM example the full-context check's
point differs from the first only by a dtype the one server serves: it needs no servers of its
own, and the servers started ahead must be the drafting pair of the speculative point (they were
skipped while that dtype point came first: the drafting servers started only when speculative
decoding's check did). Only where the host has a core per server: on fewer, servers started
ahead take the running servers' cores."""

from __future__ import annotations

import threading

from fasttrack.engine import jobs
from fasttrack.engine import servers as run_servers
from fasttrack.environment import detect_environment
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.plan import build_plan
from fasttrack.targets.pool import spec_key
from support.paths import ROOT

EXAMPLE = ROOT / "examples" / "vllm-mini-k3" / "fasttrack.yaml"


class RecordingPool:
    """The pool's start calls, in order; `acquire` answers at once (the first pair is up)."""

    def __init__(self, folder):
        self.started: list[list] = []
        self.second = threading.Event()

    def prestart(self, specs):
        self.started.append(list(specs))
        if len(self.started) == 2:
            self.second.set()

    def acquire(self, specs):
        return None


class FakeService:
    def __init__(self, pool):
        pass

    def close(self):
        pass


def start(tmp_path, monkeypatch, cores: int) -> run_servers.RunServers:
    monkeypatch.setattr(run_servers, "ServerPool", RecordingPool)
    monkeypatch.setattr(run_servers, "PoolService", FakeService)
    monkeypatch.setattr(run_servers.os, "sched_getaffinity", lambda pid: set(range(cores)))
    manifest = load_manifest(EXAMPLE)
    plan = build_plan(manifest, detect_environment(accelerators=False, root=manifest.root), KINDS)
    selected = jobs.servers_first([i for i in plan.instances if i.runnable], KINDS)
    return run_servers.RunServers(manifest, KINDS, selected, tmp_path, lambda line: None)


def test_with_a_core_per_server_the_drafting_servers_start_ahead_and_the_shared_pair_once(tmp_path, monkeypatch):
    servers = start(tmp_path, monkeypatch, cores=16)
    assert servers.pool.second.wait(30), "no servers were started ahead"
    first, ahead = ({spec_key(s) for s in call} for call in servers.pool.started)
    assert len(first) == 2 and len(ahead) == 2 and not first & ahead
    assert all("draft" in repr(key) or "speculative" in repr(key) for key in ahead), ahead


def test_with_fewer_cores_than_servers_nothing_starts_ahead(tmp_path, monkeypatch):
    """On 2 cores the drafting pair started ahead took the first pair's cores: the main job took
    406 s instead of 256 s (docs/measurements.md)."""
    servers = start(tmp_path, monkeypatch, cores=2)
    assert not servers.pool.second.wait(2)  # the decision is made before the first pair is awaited
    assert len(servers.pool.started) == 1
