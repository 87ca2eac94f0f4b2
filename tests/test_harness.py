"""The repository's own test setup (the root conftest.py): what it gives the workers of ``-n N``."""

from __future__ import annotations

import importlib.util
import os
import types
from pathlib import Path

import pytest


def _root_conftest() -> types.ModuleType:
    path = Path(__file__).resolve().parents[1] / "conftest.py"
    spec = importlib.util.spec_from_file_location("mxgate_root_conftest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config(workers: object) -> types.SimpleNamespace:
    return types.SimpleNamespace(option=types.SimpleNamespace(numprocesses=workers))


@pytest.mark.parametrize(("cores", "workers", "want"), [(2, 2, "1"), (8, 2, "4"), (2, 4, "1"), (1, 1, "1")])
def test_each_xdist_worker_gets_its_share_of_blas_and_oracle_threads(monkeypatch, cores, workers, want) -> None:
    conftest = _root_conftest()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    for name in conftest.WORKER_THREADS:
        monkeypatch.delenv(name, raising=False)
    conftest._share_cores_with_workers(_config(workers))
    assert [os.environ.get(name) for name in conftest.WORKER_THREADS] == [want] * len(conftest.WORKER_THREADS)
    assert "MXGATE_THREADS" in conftest.WORKER_THREADS


def test_a_serial_run_and_a_users_setting_are_left_alone(monkeypatch) -> None:
    conftest = _root_conftest()
    first, *rest = conftest.WORKER_THREADS
    for name in conftest.WORKER_THREADS:
        monkeypatch.delenv(name, raising=False)
    for workers in (None, 0, "auto"):  # no -n, -n 0; "auto" is resolved by xdist later
        conftest._share_cores_with_workers(_config(workers))
        assert all(name not in os.environ for name in conftest.WORKER_THREADS)
    monkeypatch.setenv(first, "3")
    conftest._share_cores_with_workers(_config(2))
    assert os.environ[first] == "3" and all(name in os.environ for name in rest)


def test_this_run_passed_it_on_to_its_workers(request) -> None:
    """Under -n N this process is a worker started after the setting: it has it."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("not an xdist worker: a serial run sets nothing")
    assert all(os.environ.get(name, "").isdigit() for name in _root_conftest().WORKER_THREADS)
