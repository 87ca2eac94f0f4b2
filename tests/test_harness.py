"""The repository's own test setup (the root conftest.py): what it gives the workers of ``-n N``."""

from __future__ import annotations

import importlib.util
import os
import sys
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


def test_pytest_keeps_its_rewritten_test_modules_under_pythondontwritebytecode(tmp_path: Path) -> None:
    """Under PYTHONDONTWRITEBYTECODE the root conftest lets pytest write its assertion-rewritten
    test modules while collecting (without it pytest writes none: each process rewrites them all),
    and the tests themselves then run with the flag as the user set it."""
    import shutil
    import subprocess

    probe = ("import os, sys\n\ndef test_probe():\n"
             "    assert sys.dont_write_bytecode and os.environ['PYTHONDONTWRITEBYTECODE'] == '1'\n")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    written = {}
    for with_conftest in (False, True):
        where = tmp_path / f"conftest-{with_conftest}"
        where.mkdir()
        (where / "test_probe.py").write_text(probe)
        if with_conftest:
            shutil.copy(Path(__file__).resolve().parents[1] / "conftest.py", where / "conftest.py")
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_probe.py"],
                              cwd=where, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        written[with_conftest] = sorted(p.name for p in (where / "__pycache__").glob("test_probe.*-pytest-*.pyc"))
    assert written[False] == [] and len(written[True]) == 1, written


@pytest.mark.parametrize(("worker", "workers", "writes"), [(True, 2, True), (False, None, True), (False, 0, True),
                                                          (False, 2, False)])
def test_only_a_collecting_process_writes_and_only_while_it_collects(monkeypatch, worker, workers, writes) -> None:
    """An xdist worker or a serial run may write bytecode from configure to the end of collection;
    the xdist controller, which collects nothing, keeps the user's flag throughout."""
    conftest = _root_conftest()
    monkeypatch.setattr(sys, "flags", types.SimpleNamespace(dont_write_bytecode=1))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    config = _config(workers)
    if worker:
        config.workerinput = {}
    conftest._keep_rewritten_tests(config)
    assert sys.dont_write_bytecode is (not writes)
    conftest.pytest_collection_finish(None)
    assert sys.dont_write_bytecode is True
