"""The server census against a real vLLM (the CPU build serving examples/vllm-mini-k3, eager):
stock and the latency plugin started as fasttrack starts a server side (`ManagedServer`), each
with vLLM's torch profiler, and their operators per decode step counted by
`fasttrack.targets.profiler.server_profiler` from the command. Skipped where vLLM or the
checkpoint is not installed (`bash scripts/install.sh`); ~30-60 s (two servers start at once)."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fasttrack.targets.openai.server import ManagedServer, ServerSpec
from fasttrack.targets.profiler import differing_operators, server_profiler
from support.paths import ROOT

pytestmark = pytest.mark.slow
pytest.importorskip("vllm")
pytest.importorskip("vllm_mini_k3")
CHECKPOINT = ROOT / "examples" / "vllm-mini-k3" / "checkpoint"


def _command(trace_dir: Path) -> tuple[str, ...]:
    config = {"profiler": "torch", "torch_profiler_dir": str(trace_dir), "ignore_frontend": True}
    return (
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(CHECKPOINT),
        "--served-model-name", "mini-k3", "--port", "{port}", "--dtype", "float32", "--max-model-len", "4096",
        "--enforce-eager", "--compilation-config", '{"custom_ops":["-rotary_embedding"]}',
        "--profiler-config", json.dumps(config),
    )  # fmt: skip


def _spec(side: str, core: int, tmp: Path) -> ServerSpec:
    env = {
        "VLLM_MLA_DISABLE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": str(core),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp / f"prom-{side}"),
        **({"VLLM_MINI_K3_LATENCY": "1"} if side == "candidate" else {}),
    }
    (tmp / f"prom-{side}").mkdir()
    return ServerSpec(
        side,
        command=_command(tmp / f"traces-{side}"),
        env=env,
        cwd=str(ROOT),
        startup_timeout_s=600,
        unset_env=("VLLM_MINI_K3_LATENCY", "VLLM_MINI_K3_FAULT") if side == "baseline" else ("VLLM_MINI_K3_FAULT",),
    )


@pytest.mark.skipif(
    not (CHECKPOINT / "config.json").is_file(), reason="no vllm-mini-k3 checkpoint (scripts/install.sh)"
)
def test_the_candidates_decode_step_has_fewer_operators_than_stocks(tmp_path):
    servers = {
        side: ManagedServer(_spec(side, core, tmp_path), tmp_path)
        for core, side in enumerate(("baseline", "candidate"))
    }
    try:
        with ThreadPoolExecutor(2) as pool:
            urls = dict(zip(servers, pool.map(lambda s: s.start(), servers.values())))
        census = {}
        for side, server in servers.items():
            profiler = server_profiler(server.spec.command or (), urls[side], cwd=ROOT, model="mini-k3")
            assert profiler is not None and profiler.n_layers == 5
            census[side] = profiler.decode_census(batch=1, steps=4)
    finally:
        for server in servers.values():
            server.stop()
    base, cand = census["baseline"], census["candidate"]
    assert base["steps"] >= 3 and cand["steps"] >= 3
    assert cand["kernels_per_step"] < 0.8 * base["kernels_per_step"]  # measured 681 against 920
    assert base["kernel_names"]["aten::rsqrt"] == 21 and cand["kernel_names"]["_C::rms_norm"] == 11
    names = [name for name, _, _ in differing_operators(base["kernel_names"], cand["kernel_names"], top=50)]
    assert "_C::fused_add_rms_norm" in names and "aten::pow" in names
