"""Shared fixtures of the kernel tests: tensor-parallel rank pools and scope parametrisation.

Ranks: TP 1 runs in this process; TP 2 and 4 run as gloo processes on this host (CPU) or one
process per GPU (CUDA, when the host has that many), started ONCE per session and reused by
every test (starting Python and torch costs seconds; a check costs milliseconds).
Device: ``MINIK3_TEST_DEVICE`` (default: cuda when available, else cpu).

Scope: tests carry ``@pytest.mark.fasttrack_scope(dims..., default=[points])``. With the
fasttrack pytest plugin installed it parametrises them (from ``--fasttrack-manifest`` or the
``default=`` points); without it, this conftest parametrises from ``default=`` itself, so the
tests also run in plain pytest.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
import torch

from mini_k3.latency.fused_allreduce import allocate_shared
from mini_k3.parallel import RankContext, TPWorkerPool, single_rank

BATCHES = [1, 3, 8, 17, 32, 64]
TP_SIZES = [1, 2, 4]
DTYPE_NAMES = ["fp32", "bf16"]
DRAFT_LENGTHS = [1, 2, 3, 4, 5, 6, 7]
CONTEXTS = [1024, 2048, 4096]  # the example's context bucket edges (fasttrack.yaml scope.context)


def grid(**axes: list[Any]) -> list[dict[str, Any]]:
    """All combinations of the given dimension values, as scope points."""
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]


def _planted_fault() -> None:
    """The gate's own acceptance tests plant a kernel fault through MINIK3_PLANTED_FAULT
    (mini_k3/faults.py); unset, nothing changes."""
    name = os.environ.get("MINIK3_PLANTED_FAULT")
    if name:
        from mini_k3.faults import KERNEL_TEST_FAULTS

        KERNEL_TEST_FAULTS[name]()


_planted_fault()


def _plugin_active(config: pytest.Config) -> bool:
    return config.pluginmanager.has_plugin("fasttrack")


def pytest_configure(config: pytest.Config) -> None:
    if not _plugin_active(config):
        config.addinivalue_line("markers", "fasttrack_scope(*dims, default=None): scope points of a kernel test")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if _plugin_active(metafunc.config):
        return
    marker = metafunc.definition.get_closest_marker("fasttrack_scope")
    if marker is None:
        return
    points = [dict(p) for p in marker.kwargs["default"]]
    metafunc.parametrize("scope_point", points, ids=[",".join(f"{k}={p[k]}" for k in sorted(p)) for p in points])


def test_device() -> str:
    wanted = os.environ.get("MINIK3_TEST_DEVICE")
    if wanted:
        return wanted
    return "cuda" if torch.cuda.is_available() else "cpu"


test_device.__test__ = False  # a helper, not a test


class Ranks:
    """Runs a job on all ranks of a TP size: in process at TP 1, on a session-long pool otherwise."""

    def __init__(self, device: str) -> None:
        self.device = device
        self._single: RankContext = single_rank(device)
        self._pools: dict[int, TPWorkerPool] = {}

    def run(self, tp: int, target: str, **kwargs: Any) -> list[Any]:
        if tp == 1:
            from mini_k3.parallel import resolve

            return [resolve(target)(self._single, **kwargs)]
        if self.device.startswith("cuda") and torch.cuda.device_count() < tp:
            pytest.skip(f"TP {tp} on CUDA needs {tp} GPUs; this host has {torch.cuda.device_count()}")
        if tp not in self._pools:
            shared = allocate_shared(tp) if self.device == "cpu" else None
            self._pools[tp] = TPWorkerPool(tp, device=self.device, shared=shared)
        return self._pools[tp].run(target, **kwargs)

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()


@pytest.fixture(scope="session")
def ranks() -> Any:
    runner = Ranks(test_device())
    yield runner
    runner.close()


@pytest.fixture
def scope_point(request: pytest.FixtureRequest) -> dict[str, Any]:
    return dict(getattr(request, "param", {}) or {})
