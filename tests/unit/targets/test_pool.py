"""The run's server pool: one server per spec, shared; both sides started at once; reached from
another process through the service; a server that died is reported, never restarted."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from fasttrack.errors import TargetError
from fasttrack.targets.openai.server import ServerSpec
from fasttrack.targets.pool import POOL_ENV, PoolService, ServerPool, remote_acquire, spec_key
from support.paths import SUPPORT

SERVER = str(SUPPORT / "fake_openai_server.py")


def spec(name: str, *extra: str, env: dict | None = None) -> ServerSpec:
    return ServerSpec(
        name=name,
        command=(sys.executable, SERVER, "--port", "{port}", *extra),
        startup_timeout_s=30.0,
        env=env or {},
        fresh_dirs=("PROMETHEUS_MULTIPROC_DIR",),
    )


def test_same_spec_is_one_server_and_other_arguments_another(tmp_path):
    pool = ServerPool(tmp_path)
    try:
        first = pool.acquire([spec("baseline"), spec("candidate")])
        again = pool.acquire([spec("baseline")])
        drafts = pool.acquire([spec("candidate", "--speculative-config", "{}")])
        assert again[0].url == first[0].url
        assert len({first[0].url, first[1].url, drafts[0].url}) == 3
        assert len(pool.keys()) == 3 and len(pool.started) == 3
        # each server got an empty metrics folder of its own, under its own folder
        folders = sorted(p.parent.name for p in tmp_path.glob("*/prometheus_multiproc_dir-*"))
        assert folders == ["01-baseline", "02-candidate", "03-candidate"]
    finally:
        pool.close()
    assert pool.keys() == []


def test_release_keeps_what_a_later_point_needs(tmp_path):
    pool = ServerPool(tmp_path)
    try:
        base, cand = pool.acquire([spec("baseline"), spec("candidate")])
        keep = spec_key(spec("baseline"))
        stopped = pool.release(lambda key: key == keep)
        assert len(stopped) == 1 and "candidate" in stopped[0]
        assert pool.acquire([spec("baseline")])[0].url == base.url
    finally:
        pool.close()


def test_a_dead_server_is_reported_and_not_restarted(tmp_path):
    pool = ServerPool(tmp_path)
    try:
        (served,) = pool.acquire([spec("candidate")])
        entry = next(iter(pool._entries.values()))
        os.killpg(entry.server.process.pid, signal.SIGKILL)
        entry.server.process.wait(timeout=10)
        for _ in range(2):
            with pytest.raises(TargetError, match="died .* not restarted"):
                pool.acquire([spec("candidate")])
        assert len(pool.started) == 1
        assert served.url
    finally:
        pool.close()


def test_a_server_that_does_not_start_is_an_error_for_every_request(tmp_path):
    pool = ServerPool(tmp_path)
    try:
        for _ in range(2):
            with pytest.raises(TargetError, match="did not start.*exited with code 3"):
                pool.acquire([spec("baseline", "--exit-now")])
        assert len(pool.started) == 1
    finally:
        pool.close()


def test_workers_reach_the_pool_through_the_service(tmp_path, monkeypatch):
    service = PoolService(ServerPool(tmp_path))
    try:
        monkeypatch.delenv(POOL_ENV, raising=False)
        assert remote_acquire([spec("baseline")]) is None  # outside a pooled run
        for name, value in service.env().items():
            monkeypatch.setenv(name, value)
        (one,) = remote_acquire([spec("baseline")])
        (two,) = remote_acquire([spec("baseline")])
        assert one.url == two.url and one.name == "baseline"
        with pytest.raises(TargetError, match="did not start"):
            remote_acquire([spec("candidate", "--exit-now")])
    finally:
        service.close()
    # nothing of the service is left in the temp folder (its socket's folder included)
    assert not os.path.exists(os.path.dirname(service.address))
