"""Server targets: lifecycle (start on a free port, health, log, stop) and the HTTP client."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("httpx")

from fasttrack.errors import TargetError
from fasttrack.targets.openai.client import OpenAITarget
from fasttrack.targets.openai.server import ManagedServer, ServerSpec
from support.paths import SUPPORT

SERVER = str(SUPPORT / "fake_openai_server.py")


def spec(*extra, timeout=20.0, name="candidate"):
    return ServerSpec(
        name=name, command=(sys.executable, SERVER, "--port", "{port}", *extra), startup_timeout_s=timeout
    )


def test_server_starts_answers_and_stops(tmp_path):
    server = ManagedServer(spec(), tmp_path)
    with server:
        proc = server.process
        target = OpenAITarget(server.base_url, server=server)
        out = target.generate(
            [
                {"prompt": "hello", "max_tokens": 4, "temperature": 0.0, "seed": 5, "stop": []},
                {"messages": [{"role": "user", "content": "hi there"}], "max_tokens": 4, "seed": 5},
            ]
        )
        assert out == [
            {"text": "echo:hello:5", "finish_reason": "stop"},
            {"text": "chat:hi there", "finish_reason": "stop"},
        ]
    assert proc.poll() is not None  # stopped
    log = server.log_path.read_text()
    assert "offline=1" in log and "POST /v1/completions" in log  # log captured, offline env set


def test_running_url_is_used_without_starting_anything(tmp_path):
    running = ManagedServer(spec(), tmp_path)
    running.start()
    try:
        with ManagedServer(ServerSpec(name="baseline", url=f"{running.base_url}/"), tmp_path) as reused:
            assert reused.process is None and reused.base_url == running.base_url
    finally:
        running.stop()


def test_server_that_dies_raises_target_error_with_its_log(tmp_path):
    with pytest.raises(TargetError, match=r"(?s)exited with code 3.*cannot load weights"):
        ManagedServer(spec("--exit-now"), tmp_path).start()


def test_server_never_healthy_times_out_and_is_stopped(tmp_path):
    server = ManagedServer(spec("--never-healthy", timeout=1.5), tmp_path)
    with pytest.raises(TargetError, match="not healthy within 1.5 s"):
        server.start()
    assert server.process is None


def test_bad_command_and_bad_spec(tmp_path):
    with pytest.raises(TargetError, match="cannot start"):
        ManagedServer(ServerSpec(name="x", command=("/nonexistent/server-binary",)), tmp_path).start()
    with pytest.raises(TargetError, match="exactly one"):
        ServerSpec(name="x")


def test_error_finish_reason_counts_as_non_finite_in_the_lm_adapter(tmp_path):
    pytest.importorskip("lm_eval")
    from fasttrack.targets.lm_adapter import TargetLM

    class Req:
        def __init__(self, ctx):
            self.args = (ctx, {"until": [], "max_gen_toks": 4})

    with ManagedServer(spec("--broken-logits"), tmp_path) as server:
        lm = TargetLM(OpenAITarget(server.base_url), name="candidate", seed=9)
        texts = lm.generate_until([Req('[{"role":"user","content":"q"}]'), Req("plain")])
    assert texts == ["chat:q", "echo:plain:9"]
    assert sum(lm.non_finite.values()) == 2


def test_stop_reaches_the_server_with_sigterm_not_a_kill_after_the_grace_period(tmp_path):
    """The guard between fasttrack and the server must not pass its own indifference to SIGTERM
    on: an ignored signal stays ignored across exec, and every server (vLLM's included) would then
    be SIGKILLed after the grace period instead of shutting down. The guard exits with the
    server's status, so 128 + SIGTERM means the server died of the SIGTERM itself."""
    server = ManagedServer(replace(spec(), stop_timeout_s=120.0), tmp_path)
    server.start()
    guard = server.process
    server.stop()
    assert guard.returncode == 128 + signal.SIGTERM


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return [int(p) for p in fh.read().split()]


def test_declared_cpus_pin_the_whole_server(tmp_path):
    one = min(os.sched_getaffinity(0))
    server = ManagedServer(replace(spec(), cpus=(one,)), tmp_path)
    with server:
        assert server.process is not None
        (child,) = _children(server.process.pid)  # the guard's one child: the server itself
        assert os.sched_getaffinity(child) == {one}
        assert b"FASTTRACK_SERVER_CPUS" not in Path(f"/proc/{child}/environ").read_bytes()
    assert os.sched_getaffinity(0) != {one} or len(os.sched_getaffinity(0)) == 1  # the gate itself is not pinned


def test_cpus_this_machine_lacks_are_refused_before_anything_starts(tmp_path):
    missing = max(os.sched_getaffinity(0)) + 1000
    with pytest.raises(TargetError, match=rf"declared on CPUs \[{missing}\] \(cpus\).*not available here"):
        ManagedServer(replace(spec(), cpus=(missing,)), tmp_path).start()
