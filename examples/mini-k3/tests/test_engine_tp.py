"""The engine at tensor_parallel_size 2 and 4 (gloo worker ranks on this host) against TP 1.

Each case starts real worker processes (a few seconds each on a 2-core host), so the cases are
few, use a tiny model with four heads, and are marked slow.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient
from mini_k3.config import MiniK3Config
from mini_k3.engine import Engine, GenerationRequest
from mini_k3.equivalence import VIOLATION, logprobs_close
from mini_k3.model import MiniK3
from mini_k3.parallel import RankError
from mini_k3.server import create_app
from mini_k3.tokenizer import ByteTokenizer

pytestmark = pytest.mark.slow

TOKENIZER = ByteTokenizer()
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
GREEDY = [GenerationRequest(p, max_tokens=12, temperature=0.0, logprobs=3, ignore_eos=True)
          for p in ("tensor", "a longer prompt for the parallel ranks", "abcabcabcabc")]
SAMPLED = GenerationRequest("seeded draws", max_tokens=10, temperature=0.9, top_p=0.9, seed=7, n=2, ignore_eos=True)
SCORED = GenerationRequest("score this prompt", max_tokens=2, temperature=0.0, prompt_logprobs=2)


def tiny_model() -> MiniK3:
    torch.manual_seed(0)
    model = MiniK3(MiniK3Config.tiny(n_heads=4))  # 4 heads: TP 2 and 4 shard evenly
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(4.0)
    return model.eval()


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def wait_gone(pids: list[int], timeout_s: float = 300.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [p for p in pids if not gone(p)]
        if not alive:
            return []
        time.sleep(0.2)
    return [p for p in pids if not gone(p)]


@pytest.fixture(scope="module")
def reference() -> Engine:
    return Engine(model=tiny_model(), tokenizer=TOKENIZER, speculative_draft_tokens=3)


# TP 4 runs the candidate path only (its stock sharding is covered by the kernel tests at TP 4),
# to keep these process-starting tests near a minute on a 2-core host.
@pytest.mark.parametrize("tp,latency", [(2, False), (2, True), (4, True)],
                         ids=["tp2-stock", "tp2-latency", "tp4-latency"])
def test_tp_engine_gives_tp1_results(reference: Engine, tp: int, latency: bool) -> None:
    path = "latency_specialized" if latency else "stock"
    with Engine(model=tiny_model(), tokenizer=TOKENIZER, tensor_parallel_size=tp, latency_specialized=latency,
                speculative_draft_tokens=3) as engine:
        pids = engine.runner.worker_pids
        assert len(pids) == tp
        requests = [*GREEDY, SAMPLED, SCORED]
        got, again, expected = engine.generate(requests), engine.generate(requests), reference.generate(requests)
        for g, e in zip(got[:3], expected[:3]):  # greedy: same tokens, or a near-tie by vLLM's rule
            verdict = logprobs_close(e.outputs[0], g.outputs[0], 3)
            assert verdict.verdict != VIOLATION, verdict.detail
            agreed = verdict.first_divergence or len(e.outputs[0].token_ids)
            for a, b in zip(g.outputs[0].logprobs[:agreed], e.outputs[0].logprobs[:agreed]):
                assert a.logprob == pytest.approx(b.logprob, abs=1e-4)
        # sampling: the same seed gives the same tokens, run to run and as at TP 1
        assert [o.token_ids for o in got[3].outputs] == [o.token_ids for o in again[3].outputs]
        assert [o.token_ids for o in got[3].outputs] == [o.token_ids for o in expected[3].outputs]
        assert [e.logprob for e in got[4].prompt_logprobs[1:]] == pytest.approx(
            [e.logprob for e in expected[4].prompt_logprobs[1:]], abs=1e-4)
        ids = TOKENIZER.encode("through the decode path")
        torch.testing.assert_close(engine.next_token_logprobs(ids, through_decode=True),
                                   reference.next_token_logprobs(ids, through_decode=True), rtol=1e-4, atol=1e-4)
        steps = engine.stats_snapshot().decode_steps_by_path
        assert steps[path] > 0 and sum(steps.values()) == steps[path]  # only the asked-for path ran
    assert wait_gone(pids) == [], "worker ranks outlived Engine.close()"
    with pytest.raises(RuntimeError, match="closed"):  # no ranks come back after close
        engine.generate(GREEDY[:1])
    assert engine.runner.worker_pids == []


def test_tp_server_counts_the_path_recovers_from_a_rank_failure_and_stops_its_ranks() -> None:
    engine = Engine(model=tiny_model(), tokenizer=TOKENIZER, tensor_parallel_size=2, latency_specialized=True)
    first_pids = engine.runner.worker_pids
    with TestClient(create_app(engine), raise_server_exceptions=False) as client:
        body = {"prompt": "served by two ranks", "max_tokens": 5, "temperature": 0, "ignore_eos": True}
        assert client.post("/v1/completions", json=body).status_code == 200
        # a step the ranks cannot run (a position past the cache) fails on the ranks, not here
        engine.runner.new_cache(1, 4)
        with pytest.raises(RankError, match="rank_forward failed on rank"):
            engine.runner.forward(torch.tensor([[5]]), torch.tensor([[10]]), decode=True)
        assert wait_gone(first_pids) == [], "the failed ranks were not stopped"
        assert client.post("/v1/completions", json=body).status_code == 200  # fresh ranks
        second_pids = engine.runner.worker_pids
        assert set(second_pids).isdisjoint(first_pids) and len(second_pids) == 2
        metrics = client.get("/metrics").text
    assert 'minik3_decode_steps_total{path="latency_specialized"} 8.0' in metrics
    assert 'minik3_decode_steps_total{path="stock"} 0.0' in metrics
    assert wait_gone(second_pids) == [], "server shutdown left worker ranks running"


def test_ranks_exit_when_the_parent_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent("""
        import json, sys, time
        import torch
        from mini_k3.config import MiniK3Config
        from mini_k3.engine import Engine
        from mini_k3.model import MiniK3
        from mini_k3.tokenizer import ByteTokenizer

        if __name__ == "__main__":
            torch.manual_seed(0)
            engine = Engine(model=MiniK3(MiniK3Config.tiny(n_heads=4)), tokenizer=ByteTokenizer(), tensor_parallel_size=2)
            print(json.dumps(engine.runner.worker_pids), flush=True)
            time.sleep(300)
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")])}
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        pids = json.loads(parent.stdout.readline())
        assert len(pids) == 2 and not any(gone(p) for p in pids)
        parent.send_signal(signal.SIGKILL)  # no close(), no atexit: only the ranks' watchdog can act
        parent.wait(timeout=120)
        assert wait_gone(pids) == [], "worker ranks outlived a killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
