"""`mxgate bench` (the host bench): its structure, never its speed.

The figures depend on the machine and its load, so nothing here compares a time or a ratio
with a threshold: the tests check which runs happen in which order, what is computed from
them and what is printed (the peer's version beside every ratio, medians and spreads).
"""

from __future__ import annotations

import json
import os
import threading

import pytest

from mxgate.cli import main
from mxgate.tools import bench

ml_dtypes = pytest.importorskip("ml_dtypes")
WITH_MACHINE = [*bench.ORDER, bench.MACHINE_ONE, bench.MACHINE]


class FakeClock:
    """A clock that moves only when a benchmarked call says how long it took."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _logging_case(clock: FakeClock, log: list[str], ours_s: dict[str, list[float]], peer_s: list[float]) -> bench.Case:
    """Oracle calls take ours_s[threads] seconds in turn, peer calls peer_s: each logs itself."""

    def ours() -> None:
        threads = os.environ.get("MXGATE_THREADS", "all")
        log.append(f"oracle:{threads}")
        clock.now += ours_s[threads].pop(0)

    def peer() -> None:
        log.append(f"peer:{os.environ.get('MXGATE_THREADS', 'all')}")
        clock.now += peer_s.pop(0)

    return bench.Case("fake", ours, "fake peer", peer)


def test_runs_interleave_and_ratios_are_per_repetition(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MXGATE_THREADS", raising=False)
    clock, log = FakeClock(), []
    # warm-up first (one call each), then three repetitions
    ours = {"1": [9.0, 4.0, 2.0, 8.0], "all": [9.0, 2.0, 1.0, 2.0]}
    peer = [9.0, 8.0, 12.0, 8.0]
    row = bench.measure(_logging_case(clock, log, ours, peer), 100, 3, "ml_dtypes 9.9.9", clock=clock,
                        cpu_clock=clock, min_sample_s=0)
    assert log == ["oracle:1", "oracle:all", "peer:all"] * 4  # warm-up, then o1, o, p per repetition
    assert row.order == list(bench.ORDER) * 3
    assert row.samples == {"oracle_1thread": [4000.0, 2000.0, 8000.0], "oracle": [2000.0, 1000.0, 2000.0],
                           "peer": [8000.0, 12000.0, 8000.0]}
    # ratios per repetition (8/4, 12/2, 8/8) and (8/2, 12/1, 8/2): medians and spreads of those
    assert row.ratio_1thread_spread == bench.Spread(2.0, 1.0, 6.0, 1.5, 4.0)
    assert row.ratio_spread == bench.Spread(4.0, 4.0, 12.0, 4.0, 8.0)
    assert row.thread_speedup_spread == bench.Spread(2.0, 2.0, 4.0, 2.0, 3.0)
    assert (row.oracle_1thread_ms, row.oracle_ms, row.peer_ms) == (4000.0, 2000.0, 8000.0)
    # the CPU clock is the same fake clock here: the CPU-time ratios are the wall ones
    assert row.cpu_samples == {"oracle_1thread": [4000.0, 2000.0, 8000.0], "peer": [8000.0, 12000.0, 8000.0]}
    assert row.cpu_ratio_1thread_spread == row.ratio_1thread_spread
    assert os.environ.get("MXGATE_THREADS") is None  # restored


def test_cpu_ratio_uses_the_cpu_clock_and_needs_a_nonzero_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MXGATE_THREADS", raising=False)
    wall, cpu = FakeClock(), FakeClock()

    def ours() -> None:
        wall.now += 5.0
        cpu.now += 1.0 if os.environ.get("MXGATE_THREADS") == "1" else 0.5

    def peer() -> None:
        wall.now += 5.0
        cpu.now += 3.0

    row = bench.measure(bench.Case("c", ours, "p", peer), 1, 2, "v", clock=wall, cpu_clock=cpu, min_sample_s=0)
    assert row.ratio_1thread == 1.0 and row.cpu_ratio_1thread_spread == bench.Spread(3.0, 3.0, 3.0, 3.0, 3.0)
    stopped = bench.measure(bench.Case("c", ours, "p", peer), 1, 1, "v", clock=wall, cpu_clock=FakeClock(),
                            min_sample_s=0)
    assert stopped.cpu_ratio_1thread_spread is None and stopped.as_dict()["cpu_ratio_1thread"] is None


def test_short_calls_are_looped_to_a_measurable_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MXGATE_THREADS", "3")
    clock, log = FakeClock(), []
    ours = {"1": [0.01] * 7, "all": [0.01] * 7}
    row = bench.measure(_logging_case(clock, log, ours, [0.02] * 5), 10, 2, "v", clock=clock, min_sample_s=0.03)
    # warm-ups size the loops: 3 calls of 10 ms, 2 calls of 20 ms per sample
    assert log[3:] == (["oracle:1"] * 3 + ["oracle:all"] * 3 + ["peer:all"] * 2) * 2
    assert row.samples["oracle"] == pytest.approx([10.0, 10.0])
    assert row.ratio == pytest.approx(2.0)
    assert os.environ["MXGATE_THREADS"] == "3"


def test_machine_reference_runs_after_the_peer_in_every_repetition(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MXGATE_THREADS", raising=False)
    clock, log = FakeClock(), []
    ours = {"1": [1.0] * 3, "all": [1.0] * 3}
    case = _logging_case(clock, log, ours, [1.0] * 3)

    def machine(name: str, seconds: float):
        def run() -> None:
            log.append(name)
            clock.now += seconds
        return run

    row = bench.measure(case, 1, 2, "v", clock=clock, min_sample_s=0, machine=(machine("m1", 3.0), machine("m", 2.0)))
    assert log == ["oracle:1", "oracle:all", "peer:all", "m1", "m"] * 3
    assert row.order == WITH_MACHINE * 2
    assert row.machine_speedup_spread == bench.Spread(1.5, 1.5, 1.5, 1.5, 1.5)
    plain = _logging_case(clock, [], {"1": [1.0] * 2, "all": [1.0] * 2}, [1.0] * 2)
    without = bench.measure(plain, 1, 1, "v", clock=clock, min_sample_s=0)
    assert without.machine_speedup_spread is None and without.as_dict()["machine_thread_speedup"] is None


def test_machine_reference_does_the_same_work_on_one_and_on_every_thread() -> None:
    one, many = bench.machine_reference(3)
    one()
    many()  # runs on a pool of 3: no error, no result to compare


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no thread affinity on this platform")
def test_machine_reference_pins_each_task_to_its_own_cpu_and_leaves_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unpinned, the scheduler ran the reference's millisecond tasks one after the other on the
    caller's CPU, so the figure read 1x whatever the CPUs did: each task pins its pool thread."""
    calls: list[tuple[int, int, set[int]]] = []  # (thread, pid argument, mask)
    first: dict[int, str] = {}  # thread -> what it did first: "pin" or "work"
    real_sqrt = bench.np.sqrt

    def pin(pid: int, mask: set[int]) -> None:
        first.setdefault(threading.get_ident(), "pin")
        calls.append((threading.get_ident(), pid, set(mask)))

    def sqrt(*args, **kwargs):
        first.setdefault(threading.get_ident(), "work")
        return real_sqrt(*args, **kwargs)

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 5, 7})  # three CPUs, none of them real
    monkeypatch.setattr(os, "sched_setaffinity", pin)
    one, many = bench.machine_reference(4)
    one()
    assert calls == []
    monkeypatch.setattr(bench.np, "sqrt", sqrt)
    many()
    assert set(first.values()) == {"pin"}  # every pool thread pinned before its first square root
    assert sorted(min(mask) for _, _, mask in calls) == [3, 3, 5, 7]  # four tasks over three CPUs
    assert all(len(mask) == 1 for _, _, mask in calls)
    assert all(pid == 0 for _, pid, _ in calls)  # each pins the thread it runs in, not the process
    assert threading.get_ident() not in {thread for thread, _, _ in calls}


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no thread affinity on this platform")
def test_machine_reference_leaves_cpus_to_the_scheduler_where_threads_are_fewer(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[set[int]] = []
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 5, 7})
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, mask: calls.append(set(mask)))
    bench.machine_reference(2)[1]()
    assert calls == []  # two of three CPUs: pinning would have to choose, and could choose busy ones


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no thread affinity on this platform")
def test_machine_reference_runs_unpinned_where_a_cpu_left_the_allowed_set(monkeypatch: pytest.MonkeyPatch) -> None:
    def gone(pid: int, mask: set[int]) -> None:
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 5})
    monkeypatch.setattr(os, "sched_setaffinity", gone)
    bench.machine_reference(2)[1]()  # the figure is still measured; nothing raises


def test_repeats_must_be_positive() -> None:
    with pytest.raises(ValueError, match="repeats"):
        bench.measure(bench.Case("c", lambda: None, "p", lambda: None), 1, 0, "v")


def test_spread_of_one_value_and_of_several() -> None:
    assert bench.Spread.of([2.5]) == bench.Spread(2.5, 2.5, 2.5, 2.5, 2.5)
    s = bench.Spread.of([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.median, s.low, s.high, s.q1, s.q3) == (3.0, 1.0, 5.0, 2.0, 4.0)


def test_table_prints_the_peer_version_beside_every_ratio() -> None:
    rows = bench.run_bench(10, 2)
    assert [r.case for r in rows] == ["mx.quantize (codes + scales)", "e2m1.encode (elements)", "e4m3fn.encode",
                                      "e4m3fnuz.encode", "bf16.round"]
    version = f"ml_dtypes {ml_dtypes.__version__}"
    table = bench.format_table(rows).splitlines()
    assert len(table) == 2 + len(rows)
    for line, row in zip(table[2:], rows):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == row.case and cells[4] == f"{version} {row.peer}"
        assert cells[6].endswith(f"vs {version}") and cells[7].endswith(f"vs {version}")
        assert "(" in cells[6] and "-" in cells[6] and "(" in cells[8]  # the min-max spreads
        assert row.repeats == 2 and row.order == WITH_MACHINE * 2
        assert "(" in cells[10] and row.machine_speedup_spread is not None
        assert cells[8] == "-" or cells[8].endswith(f"vs {version}")  # CPU-time ratio, where the clock moved


def test_cli_json_carries_versions_spreads_and_samples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--log2-size", "10", "--repeats", "3", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 5
    for r in rows:
        assert r["peer_version"] == f"ml_dtypes {ml_dtypes.__version__}" and r["repeats"] == 3
        for key in ("ratio_spread", "ratio_1thread_spread", "thread_speedup"):
            s = r[key]
            assert s["low"] <= s["q1"] <= s["median"] <= s["q3"] <= s["high"]
        assert r["ratio"] == pytest.approx(r["ratio_spread"]["median"], abs=0.006)
        assert all(len(v) == 3 for v in r["samples_ms"].values())
        assert r["order"] == WITH_MACHINE * 3
        assert set(r["machine_thread_speedup"]) == {"median", "low", "high", "q1", "q3"}


def test_cli_table_header_names_threads_repeats_and_peer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--log2-size", "10", "--repeat", "2"]) == 0  # --repeat: the old spelling
    out = capsys.readouterr().out
    assert f"peer ml_dtypes {ml_dtypes.__version__}" in out.splitlines()[0]
    assert "medians of 2 interleaved repetitions" in out
    # two wall-time ratios on each of five rows, and the CPU-time ratio where the CPU clock moved
    assert 10 <= out.count(f"vs ml_dtypes {ml_dtypes.__version__}") <= 15
