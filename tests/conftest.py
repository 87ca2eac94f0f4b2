"""Shared setup of the repository's own tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread(request: pytest.FixtureRequest):
    """The twin's tests (test_twin*.py) run small CPU tensors: one intra-op thread (OpenMP
    workers spinning on a busy 2-core runner made each op call a hundred times slower)."""
    if not request.module.__name__.rpartition(".")[2].startswith("test_twin"):
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
