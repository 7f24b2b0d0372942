"""In-process CPU targets get one intra-op thread; HTTP targets and GPU points are left alone."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from fasttrack.process.cpu import pin_single_thread


@pytest.fixture
def two_threads():
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(previous)


def manifest(kind: str) -> SimpleNamespace:
    return SimpleNamespace(target=SimpleNamespace(kind=kind))


def test_python_target_on_cpu_runs_on_one_thread(two_threads):
    assert pin_single_thread(manifest("python"), {"accelerator": "cpu", "tensor_parallel": 2}) == 1
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize(
    "kind, point", [("openai", {"accelerator": "cpu"}), ("python", {"accelerator": "NVIDIA H200"})]
)
def test_servers_and_gpu_points_keep_their_threads(two_threads, kind, point):
    assert pin_single_thread(manifest(kind), point) is None
    assert torch.get_num_threads() == 2
