"""No kernel that is wrong on some calls, refuses the hard inputs, rewrites its inputs, tells the
gate apart, forges its worker's replies or exits while loading can make the gate exit 0.

Each test plants such a kernel (tests/user_backends/dishonest_backends.py and the *_at_import
modules) and runs the gate as its users do: the installed command from a scratch directory,
judged by its exit status and the report files it leaves there. Kernels whose runs end alike
share one run (module fixtures), each test reading its own kernel's cell.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from mxgate.conformance import outcome

USER_BACKENDS = Path(__file__).parent / "user_backends"
REPORTS = ["--json", "m.json", "--markdown", "m.md", "--junitxml", "j.xml"]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(USER_BACKENDS)] + [p for p in [env.get("PYTHONPATH")] if p])
    for name in ("MXGATE_TIMEOUT", "MXGATE_STARTUP_TIMEOUT", "FLAKY_SEED", "DISHONEST_MARKERS"):
        env.pop(name, None)
    env.update(extra)
    return env


def _check(tmp_path: Path, backend: str, *more: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    return _check_all(tmp_path, [backend], *more, timeout=timeout, **env)


def _check_all(tmp_path: Path, backends: list[str], *more: str, timeout: float = 600,
               **env: str) -> subprocess.CompletedProcess:
    named = [arg for name in backends for arg in ("--backend", name)]
    return subprocess.run([sys.executable, "-m", "mxgate", "check", *named, "--tier", "quick", *REPORTS, *more],
                          cwd=tmp_path, env=_env(**env), capture_output=True, text=True, timeout=timeout)


@dataclass(frozen=True)
class Run:
    """A finished gate run and the folder it was started in (its reports lie there)."""

    done: subprocess.CompletedProcess
    where: Path


def _cells(tmp_path: Path) -> dict[tuple[str, str], dict]:
    return {(c["backend"], c["op"]): c for c in json.loads((tmp_path / "m.json").read_text())["cells"]}


def _junit_problems(path: Path) -> int:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    return sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)


def _reasons(cell: dict) -> str:
    return " | ".join(f["reason"] for f in cell["failures"])


def _assert_failed_with_reports(done: subprocess.CompletedProcess, tmp_path: Path) -> None:
    assert done.returncode == outcome.EXIT_FAIL, done.stdout[-3000:] + done.stderr[-3000:]
    for name in ("m.json", "m.md", "j.xml"):
        assert (tmp_path / name).is_file(), name
    assert _junit_problems(tmp_path / "j.xml") > 0
    assert json.loads((tmp_path / "m.json").read_text())["exit_status"] == outcome.EXIT_FAIL


# One gate run judges every planted kernel below that must fail, and one every planted kernel
# that must pass: each backend loads and runs in a worker of its own, so one kernel's fault never
# meets another's, and each test reads its own backend's cell (the run's exit status and reports
# are the same for all of them). detects_gate's run has MXGATE_TIMEOUT set: its worker must not see it.
LOAD_FAULTS = {
    "exit_at_import:Backend": "failed to load: raised SystemExit: 0",
    "os_exit_at_import:Backend": "failed to load: crashed: the worker exited with status 0 while loading",
    "segfault_at_import:Backend": "failed to load: crashed: signal 11 (SIGSEGV) while loading",
    "raises_at_import:Backend": "failed to load: raised RuntimeError: planted error while importing",
    "dishonest_backends:ExitsInAvailable": "failed to load: raised SystemExit: 0",
    "dishonest_backends:SegfaultsInOps": "failed to load: crashed: signal 11 (SIGSEGV) while loading",
}
FAILING = [*LOAD_FAULTS, "dishonest_backends:nan_into_input", "dishonest_backends:zeroes_input",
           "dishonest_backends:refuses_hard", "dishonest_backends:detects_gate", "dishonest_backends:forges_reply"]
PASSING = ["dishonest_backends:declares_hard", "dishonest_backends:forks_into_loop", "dishonest_backends:forks_sleeper",
           "counted_import:Backend"]
in_failing_run = pytest.mark.xdist_group("honest-gate-failing-run")
in_passing_run = pytest.mark.xdist_group("honest-gate-passing-run")


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    where = tmp_path_factory.mktemp("failing-run")
    return Run(_check_all(where, FAILING, MXGATE_TIMEOUT="300"), where)


@pytest.fixture(scope="module")
def passing_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    where = tmp_path_factory.mktemp("passing-run")
    (where / "markers").mkdir()
    return Run(_check_all(where, PASSING, DISHONEST_MARKERS=str(where / "markers")), where)


@in_failing_run
def test_the_failing_run_exits_1_with_every_report(failing_run: Run) -> None:
    _assert_failed_with_reports(failing_run.done, failing_run.where)
    assert {backend for backend, _ in _cells(failing_run.where)} == set(FAILING)


@in_passing_run
def test_the_passing_run_exits_0(passing_run: Run) -> None:
    assert passing_run.done.returncode == outcome.EXIT_PASS, passing_run.done.stdout[-3000:] + passing_run.done.stderr[-3000:]
    assert {backend for backend, _ in _cells(passing_run.where)} == set(PASSING)


# --- route 1: loading runs in the worker ----------------------------------------------------------

@in_failing_run
@pytest.mark.parametrize("backend, cause", LOAD_FAULTS.items(), ids=list(LOAD_FAULTS))
def test_a_fault_while_loading_is_a_fail_of_that_backend_with_every_report(failing_run: Run, backend: str,
                                                                           cause: str) -> None:
    _assert_failed_with_reports(failing_run.done, failing_run.where)
    cell = _cells(failing_run.where)[(backend, "(loading)")]
    assert cell["verdict"] == "fail" and cause in _reasons(cell), _reasons(cell)


def test_a_load_that_hangs_fails_at_the_startup_budget(tmp_path: Path) -> None:
    """ops() never returns: the budget only decides how long the gate waits, never the verdict."""
    backend = "dishonest_backends:HangsInOps"
    done = _check(tmp_path, backend, "--startup-timeout", "2")
    _assert_failed_with_reports(done, tmp_path)
    cell = _cells(tmp_path)[(backend, "(loading)")]
    assert cell["verdict"] == "fail" and "failed to load: timeout after 2 s (loading the backend)" in _reasons(cell)


EXITS_WHILE_LOADING = ["exit_at_import:Backend", "os_exit_at_import:Backend"]


@pytest.fixture(scope="module")
def pytest_route_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    where = tmp_path_factory.mktemp("pytest-route")
    named = [arg for name in EXITS_WHILE_LOADING for arg in ("--backend", name)]
    done = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "mxgate.conformance", *named,
                           "--tier", "quick", "--mxgate-json", "m.json", "--junitxml", "j.xml", "-p", "no:cacheprovider",
                           "-q"], cwd=where, env=_env(), capture_output=True, text=True, timeout=600)
    return Run(done, where)


@pytest.mark.xdist_group("honest-gate-pytest-route")
@pytest.mark.parametrize("backend", EXITS_WHILE_LOADING)
def test_the_pytest_route_fails_an_exit_while_loading_too(pytest_route_run: Run, backend: str) -> None:
    done, where = pytest_route_run.done, pytest_route_run.where
    assert done.returncode == outcome.EXIT_FAIL, done.stdout[-3000:] + done.stderr[-3000:]
    assert (where / "m.json").is_file() and _junit_problems(where / "j.xml") > 0
    assert _cells(where)[(backend, "(loading)")]["verdict"] == "fail"


def test_a_module_that_cannot_be_collected_is_an_internal_error_not_an_interruption(tmp_path: Path) -> None:
    """pytest says INTERRUPTED (2) for errors during collection too: without a signal the gate
    exits 3 and marks nothing as interrupted (it exited 130, "INTERRUPTED by SIGINT")."""
    (tmp_path / "test_broken_import.py").write_text("import no_such_module_anywhere\n\ndef test_x():\n    pass\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "mxgate.conformance", "test_broken_import.py",
                           "--backend", "oracle", "--tier", "quick", "--mxgate-json", "m.json", "-p", "no:cacheprovider",
                           "-q"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == outcome.EXIT_INTERNAL, done.stdout[-3000:] + done.stderr[-3000:]
    matrix = json.loads((tmp_path / "m.json").read_text())
    assert matrix["exit_status"] == outcome.EXIT_INTERNAL and not matrix["interrupted"]
    assert "INTERRUPTED" not in done.stdout


@pytest.mark.parametrize("extra", [[], ["--allow-unsupported"]], ids=["plain", "allow-unsupported"])
def test_a_name_that_is_no_backend_is_a_usage_error_whatever_the_flags(tmp_path: Path, extra: list[str]) -> None:
    done = _check(tmp_path, "os:getcwd", *extra, timeout=120)
    assert done.returncode == outcome.EXIT_USAGE, done.stdout + done.stderr
    assert done.stderr.strip().count("\n") == 0 and "not a mxgate.kernels.Backend" in done.stderr
    assert not (tmp_path / "m.json").exists() and "mxgate check: tier" not in done.stdout


# --- route 2: writing into the inputs -------------------------------------------------------------

@in_failing_run
@pytest.mark.parametrize("backend, op", [
    ("dishonest_backends:nan_into_input", "e2m1.encode"),
    ("dishonest_backends:zeroes_input", "e2m1.encode"),
    ("dishonest_backends:zeroes_input", "mx.quantize"),
])
def test_a_kernel_that_writes_into_its_input_fails(failing_run: Run, backend: str, op: str) -> None:
    _assert_failed_with_reports(failing_run.done, failing_run.where)
    cell = _cells(failing_run.where)[(backend, op)]
    assert cell["verdict"] == "fail" and "wrote into its input x" in _reasons(cell), _reasons(cell)


# --- route 3: refusing the hard inputs ------------------------------------------------------------

@in_failing_run
def test_refusing_inputs_the_contract_does_not_exclude_fails(failing_run: Run) -> None:
    backend = "dishonest_backends:refuses_hard"
    _assert_failed_with_reports(failing_run.done, failing_run.where)
    for op in ("e2m1.encode", "mx.quantize"):
        cell = _cells(failing_run.where)[(backend, op)]
        assert cell["verdict"] == "fail", cell
        assert "refused inputs its declared contract does not exclude (OutsideContract: NaN or |x| > 6)" in _reasons(cell)


@in_passing_run
def test_a_declared_contract_is_honoured_and_the_cell_says_how_much_was_judged(passing_run: Run) -> None:
    backend = "dishonest_backends:declares_hard"
    done = passing_run.done
    assert done.returncode == outcome.EXIT_PASS, done.stdout[-3000:] + done.stderr[-3000:]
    cell = _cells(passing_run.where)[(backend, "e2m1.encode")]
    judged = cell["counts"]["exact"] + cell["counts"]["acceptable"]
    outside = cell["counts"]["unsupported"]
    assert judged and outside
    assert f"({judged} of {judged + outside} configs judged)" in done.stdout
    assert "this kernel's contract is finite |x| <= 6" in " ".join(cell["unsupported_reasons"])


# --- route 4: wrong on some calls ------------------------------------------------------------------

# Seeds whose stream goes wrong first on its second draw: the repeat of the first call that the
# gate always makes, however long the burst's other calls take. Any later draw would depend on
# how many burst calls fit in BURST_SECONDS, that is on how busy the machine is.
FLAKY_SEEDS = (15, 42)


@pytest.mark.parametrize("seed", FLAKY_SEEDS)
@pytest.mark.parametrize("tier", ["quick", "default"])
def test_a_kernel_wrong_on_one_call_in_twenty_fails(tmp_path: Path, seed: int, tier: str) -> None:
    """Seeded: each seed goes wrong on the same calls every run (the catch rate over truly
    random runs is measured by benchmarks/flaky_catch_rate.py)."""
    draws = random.Random(seed)
    assert [draws.random() < 0.05 for _ in range(2)] == [False, True]  # the guaranteed repeat is wrong
    backend = "dishonest_backends:flaky_seeded"
    done = subprocess.run([sys.executable, "-m", "mxgate", "check", "--backend", backend, "--tier", tier, *REPORTS],
                          cwd=tmp_path, env=_env(FLAKY_SEED=str(seed)), capture_output=True, text=True, timeout=600)
    _assert_failed_with_reports(done, tmp_path)
    cells = _cells(tmp_path)
    assert any(cells[(backend, op)]["verdict"] == "fail" for op in ("e2m1.encode", "mx.quantize"))


def test_repeat_calls_name_the_first_differing_element() -> None:
    from mxgate.kernels.isolation import first_difference

    a = (__import__("numpy").arange(6, dtype="uint8").reshape(2, 3), 1.5)
    b = (a[0].copy(), 1.5)
    assert first_difference(a, b) is None
    b[0][1, 2] ^= 0x10
    assert first_difference(a, b) == "result[0] at (1, 2): bytes 0x05 then 0x15 (1 of 6 elements differ)"
    np = __import__("numpy")
    nan = np.float32([np.nan, -0.0])
    other = np.float32([-np.nan, 0.0])
    assert "(2 of 2 elements differ)" in first_difference(nan, other)  # NaN sign and the sign of zero count


# --- route 5: the kernel can tell it is being tested ------------------------------------------------

@in_failing_run
def test_the_worker_environment_says_nothing_of_the_gate(failing_run: Run) -> None:
    _assert_failed_with_reports(failing_run.done, failing_run.where)
    assert _cells(failing_run.where)[("dishonest_backends:detects_gate", "e2m1.encode")]["verdict"] == "fail"


# --- route 6: the worker's pipe -----------------------------------------------------------------

@in_failing_run
def test_a_forged_reply_on_the_workers_pipe_is_a_fail(failing_run: Run) -> None:
    _assert_failed_with_reports(failing_run.done, failing_run.where)
    cell = _cells(failing_run.where)[("dishonest_backends:forges_reply", "e2m1.encode")]
    assert cell["verdict"] == "fail" and "a reply the gate did not ask for" in _reasons(cell), _reasons(cell)


@in_passing_run
def test_a_child_forked_into_the_worker_loop_shifts_no_reply(passing_run: Run) -> None:
    done = passing_run.done
    assert done.returncode == outcome.EXIT_PASS, done.stdout[-3000:] + done.stderr[-3000:]
    assert _cells(passing_run.where)[("dishonest_backends:forks_into_loop", "e2m1.encode")]["verdict"] in ("exact",
                                                                                                        "acceptable")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its parent counts as gone
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@in_passing_run
def test_no_child_of_a_kernel_outlives_the_run(passing_run: Run) -> None:
    done = passing_run.done
    assert done.returncode == outcome.EXIT_PASS, done.stdout[-3000:] + done.stderr[-3000:]
    pids = [int(p.read_text()) for p in (passing_run.where / "markers").glob("sleeper-*")]
    assert pids
    deadline = time.monotonic() + 10
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in pids if _alive(pid)]


# --- route 7: mxgate sweep --device is isolated -------------------------------------------------

@pytest.mark.parametrize("backend, says, limit", [
    ("faulty_backends:Raising", "raised ValueError: planted ValueError from the kernel", "120"),
    ("faulty_backends:Segfault", "crashed: signal 11 (SIGSEGV)", "120"),
    ("faulty_backends:Hanging", "timeout after 2 s", "2"),  # it never returns: the limit only decides the wait
    ("dishonest_backends:forges_reply", "a reply the gate did not ask for", "120"),
    ("os_exit_at_import:Backend", "failed to load", "120"),
])
def test_a_faulty_encoder_in_the_device_sweep_is_a_fail(tmp_path: Path, backend: str, says: str, limit: str) -> None:
    done = subprocess.run([sys.executable, "-m", "mxgate", "sweep", "e2m1", "--device", "cpu", "--backend", backend,
                           "--chunk-bits", "16", "--chunks", "1", "--quiet", "--timeout", limit],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == outcome.EXIT_FAIL, done.stdout + done.stderr
    assert says in done.stdout, done.stdout + done.stderr


# --- routes 8 and 9: interruption, and two runs on one report path ----------------------------------

def _start_hung_run(tmp_path: Path, markers: Path, sigint: object = signal.default_int_handler) -> subprocess.Popen:
    # A run started from a background job (`cmd &` in a script) inherits SIGINT ignored, and
    # Python, and so the gate, keeps it ignored: these tests send SIGINT to a gate that receives
    # it, as one in the foreground does. A Python handler in this process while the child starts
    # becomes the default in the child (exec resets caught signals), unlike an inherited SIG_IGN.
    previous = signal.signal(signal.SIGINT, sigint)
    try:
        run = subprocess.Popen([sys.executable, "-m", "mxgate", "check", "--backend", "dishonest_backends:hangs_marked",
                                "--tier", "quick", "--timeout", "600", *REPORTS], cwd=tmp_path,
                               env=_env(DISHONEST_MARKERS=str(markers)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    deadline = time.monotonic() + 300
    while not (markers / "hung-worker").is_file():
        assert run.poll() is None and time.monotonic() < deadline, "the hanging kernel never started"
        time.sleep(0.2)
    return run


def _hung_worker(markers: Path) -> int:
    """The hung kernel's worker pid, once its marker holds it (the kernel writes it, then hangs)."""
    marker, deadline = markers / "hung-worker", time.monotonic() + 300
    while not (marker.is_file() and (text := marker.read_text().strip())):
        assert time.monotonic() < deadline, "the hanging kernel wrote no pid"
        time.sleep(0.05)
    return int(text)


def _interrupt(run: subprocess.Popen, number: int, worker: int) -> tuple[str, str]:
    run.send_signal(number)
    try:
        return run.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        # the hung worker holds the run's output pipes: end both, or reading them waits forever
        run.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker, signal.SIGKILL)
        out, err = run.communicate(timeout=60)
        pytest.fail(f"the run did not end within 120 s of {signal.Signals(number).name}:\n{out[-3000:]}\n{err[-3000:]}")


def _assert_interrupted(run: subprocess.Popen, out: str, err: str, where: Path, worker: int, number: int,
                        status: int) -> None:
    assert run.returncode == status, out[-3000:] + err[-3000:]
    name = signal.Signals(number).name
    report = json.loads((where / "m.json").read_text())
    assert report["interrupted"] == name and report["exit_status"] == status
    assert f"Interrupted by {name}" in (where / "m.md").read_text()
    assert _junit_problems(where / "j.xml") >= 1 and "interrupted" in (where / "j.xml").read_text()
    deadline = time.monotonic() + 10
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(worker)


@dataclass(frozen=True)
class Terminated:
    """A run held its report paths (its kernel hung) while a second run on them was tried, then got SIGTERM."""

    run: subprocess.Popen
    out: str
    err: str
    where: Path
    worker: int
    second: subprocess.CompletedProcess


@pytest.fixture(scope="module")
def terminated_run(tmp_path_factory: pytest.TempPathFactory) -> Terminated:
    where = tmp_path_factory.mktemp("terminated-run")
    markers = where / "markers"
    markers.mkdir()
    run = _start_hung_run(where, markers)
    worker = _hung_worker(markers)
    try:
        second = _check(where, "oracle", timeout=120)
    finally:
        out, err = _interrupt(run, signal.SIGTERM, worker)
    return Terminated(run, out, err, where, worker, second)


@pytest.mark.xdist_group("honest-gate-terminated-run")
def test_a_terminated_run_writes_marked_reports_and_ends_its_workers(terminated_run: Terminated) -> None:
    t = terminated_run
    _assert_interrupted(t.run, t.out, t.err, t.where, t.worker, signal.SIGTERM, outcome.EXIT_TERMINATED)


def test_an_interrupted_run_writes_marked_reports_and_ends_its_workers(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    run = _start_hung_run(tmp_path, markers)
    worker = _hung_worker(markers)
    time.sleep(0.5)
    out, err = _interrupt(run, signal.SIGINT, worker)
    _assert_interrupted(run, out, err, tmp_path, worker, signal.SIGINT, outcome.EXIT_INTERRUPTED)


def test_a_stop_request_ends_a_wait_on_a_hung_kernel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The gate's signal handler also tells the isolation layer to stop: where its
    KeyboardInterrupt was lost (raised in a finalizer or a broad except), the wait on a hung
    kernel still ends with one, and no later call starts; a new run clears the request. The
    worker left in its call is killed without a stop request it could not read."""
    import threading

    import numpy as np

    from mxgate.kernels import isolation

    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.syspath_prepend(str(USER_BACKENDS))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(USER_BACKENDS)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    monkeypatch.setenv("DISHONEST_MARKERS", str(markers))
    backend = isolation.load("dishonest_backends:hangs_marked", timeout=120)

    def stop_once_the_kernel_hangs() -> None:  # the handler's flag, without its raise
        _hung_worker(markers)
        isolation.request_stop("SIGINT")

    stopper = threading.Thread(target=stop_once_the_kernel_hangs, daemon=True)
    try:
        stopper.start()
        with pytest.raises(KeyboardInterrupt, match="SIGINT"):
            backend.op("e2m1.encode").run(np.zeros(32, np.float32))  # the kernel never returns
        # still in the call: a stop request would wait out the grace, so closing kills it at once
        assert backend._worker.busy and not backend._worker.ask_to_stop()
        with pytest.raises(KeyboardInterrupt):
            backend.op("e8m0.decode").run(np.zeros(4, np.uint8))  # the op is fine, but the run is stopping
    finally:
        stopper.join(60)
        isolation.clear_stop()
        backend.close()
    again = isolation.load("dishonest_backends:hangs_marked", timeout=120)
    try:
        assert again.op("e8m0.decode").run(np.full(2, 127, np.uint8)).tolist() == [1.0, 1.0]
    finally:
        again.close()


def test_a_run_started_with_sigint_ignored_keeps_it_ignored_and_sigterm_still_ends_it(tmp_path: Path) -> None:
    """As every program does, a gate started with SIGINT ignored (a background job of a shell
    script) does not stop on it; SIGTERM, which the gate always handles, still ends the run with
    marked reports and its workers."""
    markers = tmp_path / "markers"
    markers.mkdir()
    run = _start_hung_run(tmp_path, markers, sigint=signal.SIG_IGN)
    worker = _hung_worker(markers)
    run.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert run.poll() is None, "the run ended on a SIGINT it was started ignoring"
    out, err = _interrupt(run, signal.SIGTERM, worker)
    _assert_interrupted(run, out, err, tmp_path, worker, signal.SIGTERM, outcome.EXIT_TERMINATED)


@pytest.mark.xdist_group("honest-gate-terminated-run")
def test_a_second_run_on_a_report_path_a_live_run_holds_is_refused(terminated_run: Terminated) -> None:
    second = terminated_run.second
    assert second.returncode == outcome.EXIT_USAGE, second.stdout + second.stderr
    assert "another mxgate run (pid" in second.stderr and second.stderr.strip().count("\n") == 0
    # the lock went with the first run: a run of a right one-op kernel on the same paths passes
    again = _check(terminated_run.where, "counted_import:Backend", timeout=600)
    assert again.returncode == outcome.EXIT_PASS, again.stdout[-2000:] + again.stderr[-2000:]


def test_a_scorer_cell_that_differs_between_calls_is_judged_as_nan_and_a_code_is_a_fail(monkeypatch) -> None:
    """Scorer outputs are defined in a window only: cells that differ between calls reach the
    judge as the UNSTABLE NaN (failing inside the window, ignored outside); any differing byte
    of an exactly compared op is a fail (nondeterministic)."""
    import numpy as np

    from mxgate.kernels import Backend, Op, isolation

    monkeypatch.setattr(isolation._Session, "pid", os.getpid())
    rng = np.random.Generator(np.random.PCG64(7))

    def logits(**kwargs):
        out = np.ones((2, 8), np.float32)
        out[:, 6:] = rng.standard_normal((2, 2)).astype(np.float32)  # "torch.empty" bytes past the window
        return out

    def codes(x):
        out = np.zeros(x.shape, np.uint8)
        out[0] = rng.integers(0, 16)
        return out

    class Unstable(Backend):
        def ops(self):
            return {"pa_mqa_logits_fp8.decode": Op("pa_mqa_logits_fp8.decode", "gfx950", logits),
                    "e2m1.encode": Op("e2m1.encode", "gfx950", codes)}

    twice = isolation.Repeats(3, 3, float("inf"))
    kind, (result, written, unstable) = isolation._answer(Unstable(), "pa_mqa_logits_fp8.decode", (), {}, twice)
    assert kind == "ok" and written == {} and unstable == 4
    assert (result[:, :6] == 1).all() and (result[:, 6:].view(np.uint32) == isolation.UNSTABLE_BITS).all()
    kind, message = isolation._answer(Unstable(), "e2m1.encode", (np.zeros(4, np.float32),), {}, twice)
    assert kind == "nondeterministic" and "result at (0,)" in message


def test_a_slow_start_is_timed_by_the_startup_budget_not_the_call_limit(tmp_path: Path) -> None:
    """A 4 s import with a 2 s per-call limit: the op's own fault is the verdict (a busy runner's
    slow import never reads as a hung op)."""
    backend = "slow_import_backends:Backend"
    done = _check(tmp_path, backend, "--timeout", "2", SLOW_IMPORT_SECONDS="4")
    _assert_failed_with_reports(done, tmp_path)
    reasons = _reasons(_cells(tmp_path)[(backend, "e2m1.encode")])
    assert "raised ValueError: planted ValueError after a slow import" in reasons and "timeout" not in reasons, reasons


@in_passing_run
def test_a_backend_is_imported_once_in_one_worker_and_never_by_the_gate(passing_run: Run) -> None:
    """mxgate check loads the backend before the run and the run takes that worker over: one
    import, in one process that is not the gate's."""
    done = passing_run.done
    assert done.returncode == outcome.EXIT_PASS, done.stdout[-3000:] + done.stderr[-3000:]
    assert len((passing_run.where / "markers" / "imports").read_text().split()) == 1
