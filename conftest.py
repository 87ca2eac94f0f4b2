"""Repository-level pytest setup: load the mxgate plugin when it is not installed as an entry point,
compile mxgate's bytecode once for the processes the tests start, keep pytest's rewritten test
modules, and give each xdist worker its share of the cores for BLAS and the oracle's threads."""

from __future__ import annotations

import compileall
import os
import sys
from importlib.metadata import entry_points
from pathlib import Path

if not any(ep.value == "mxgate.conformance.plugin" for ep in entry_points(group="pytest11")):
    pytest_plugins = ["mxgate.conformance.plugin"]


# BLAS's threads and the oracle's (mxgate.oracle.parallel); the gate runs the tests start inherit them
WORKER_THREADS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "MXGATE_THREADS")


def _share_cores_with_workers(config) -> None:
    """With ``-n N``, each of the N workers gets cores / N BLAS and oracle threads (set before the
    workers start, so before their NumPy loads BLAS; a value the user set is kept). OpenBLAS
    otherwise starts a thread per core in every worker: with the other core busy, its threads wait
    on each other over the scorers' small float64 matmuls (test_twin_scorers_sglang's configs test
    beside a busy loop: 10.9 s and 12.9 s of CPU with two threads, 7.4 s and 6.9 s with one). The
    oracle's block threads likewise only contend with the other worker (identify's and the exact
    model's test files under -n 2: 126 s and 133 s of CPU with two, 121 s and 122 s with one)."""
    workers = getattr(config.option, "numprocesses", None)
    if not isinstance(workers, int) or workers < 1:
        return
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # platforms without affinity
        cores = os.cpu_count() or 1
    for name in WORKER_THREADS:
        os.environ.setdefault(name, str(max(1, cores // workers)))


def pytest_configure(config) -> None:
    if not hasattr(config, "workerinput"):
        _share_cores_with_workers(config)
    _compile_once(config)
    _keep_rewritten_tests(config)


def pytest_collection_finish(session) -> None:
    if sys.flags.dont_write_bytecode:  # what the tests import later is written as the user asked
        sys.dont_write_bytecode = True


def _keep_rewritten_tests(config) -> None:
    """Under PYTHONDONTWRITEBYTECODE pytest reads its cache of assertion-rewritten test modules but
    never writes it, so every pytest process (each xdist worker, and the pytest runs the tests
    start, which import mxgate's conformance test modules) parses and rewrites every test module
    again, run after run. Writing is allowed while this process collects (what it imports then is
    the test modules and what they import), so the workers leave the cache for the runs the tests
    start and for the next run. README's test command with no cache: 558 busy core-seconds, 5 min
    2.7 s; with one: 533-546, 4 min 46.8 s to 4 min 54.5 s (docs/results/cpu-2026-12-06-speed.md)."""
    xdist_controller = not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None)
    if sys.flags.dont_write_bytecode and not xdist_controller:  # the controller collects nothing
        sys.dont_write_bytecode = False


def _compile_once(config) -> None:
    """Under PYTHONDONTWRITEBYTECODE an editable checkout has no bytecode, and each of the few
    hundred Python processes the tests start (gate runs, backend workers, CLI calls) compiled the
    package again: about 0.3 s of CPU each. Compiled once here, the children read it (the flag
    stops only writing). A site-packages install already has its bytecode from pip."""
    if hasattr(config, "workerinput") or not sys.flags.dont_write_bytecode:
        return
    package = Path(__file__).resolve().parent / "mxgate"
    if package.is_dir():
        compileall.compile_dir(str(package), quiet=2, workers=1)
