"""Shared fixtures for the mini-k3 tests."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def single_thread():
    """Tiny models run fastest on one thread, and never stall on a busy shared machine."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
