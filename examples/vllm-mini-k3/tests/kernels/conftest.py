"""Fixtures of the plugin's kernel tests: vLLM's stock model and the plugin's, per dtype.

Both are built once per session in this process from the exported checkpoint (vLLM's config
context, a one-rank gloo group, no server: `vllm_mini_k3.inprocess`), a few seconds per dtype.

Scope: tests carry ``@pytest.mark.fasttrack_scope(dims..., default=[points])``. With the fasttrack
pytest plugin installed it parametrises them (from ``--fasttrack-manifest`` or the ``default=``
points); without it, this conftest parametrises from ``default=`` itself, as
examples/mini-k3/tests/kernels/conftest.py does.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
import torch

BATCHES = [1, 3, 8, 17, 32, 64]
DTYPES = {"fp32": "float32", "bf16": "bfloat16"}

os.environ.setdefault("VLLM_MLA_DISABLE", "1")  # mini-k3's sizes: decompressed attention


def grid(**axes: list[Any]) -> list[dict[str, Any]]:
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]


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


@pytest.fixture
def scope_point(request: pytest.FixtureRequest) -> dict[str, Any]:
    return dict(getattr(request, "param", {}) or {})


@pytest.fixture(scope="session")
def model_pairs() -> Any:
    from vllm_mini_k3.export import ensure_checkpoint
    from vllm_mini_k3.inprocess import ModelPair

    torch.set_num_threads(1)  # tiny layers: one thread is fastest and never stalls a busy host
    checkpoint = ensure_checkpoint()
    pairs: dict[str, ModelPair] = {}

    def get(dtype: str) -> ModelPair:
        if dtype not in pairs:
            pairs[dtype] = ModelPair(checkpoint, DTYPES[dtype])
        return pairs[dtype]

    return get
