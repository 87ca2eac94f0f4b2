"""Oracle throughput as a ratio against a peer measured in the same run (ml_dtypes' C++ casts).

Ratios, not absolute times, are the figure of merit: both sides see the same machine and load.
On a shared machine one timing swings with the neighbours' work, so each case is measured
``repeats`` times with its runs interleaved (oracle on one thread, oracle on every thread,
peer; again), each repetition gives its own ratios from runs seconds apart at most, and a
case reports the median ratio with its spread (min-max and quartiles) over repetitions.
Each repetition also times the machine reference (the same plain NumPy work on one thread and
on every thread, one pool thread pinned per CPU where the threads cover every CPU): what a
second thread could give at that moment, beside what it gave; and
the calling thread's CPU time of the one-thread oracle and of the peer, whose ratio leaves out
the time the machine gave to other processes.
A benchmark is a figure, never a test verdict: nothing here compares against a threshold.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from mxgate import oracle
from mxgate.op_table import OpName
from mxgate.tools.optional import require

ONE_THREAD, THREADS, PEER = "oracle_1thread", "oracle", "peer"
ORDER = (ONE_THREAD, THREADS, PEER)  # the runs of one repetition, in the order they run
MACHINE_ONE, MACHINE = "machine_1thread", "machine"  # the machine's own 1-vs-N-thread reference
MIN_SAMPLE_S = 0.02  # a sample loops a call until it lasts this long (small sizes: timer noise)


@dataclass(frozen=True)
class Case:
    name: str
    ours: Callable[[], object]
    peer_name: str
    peer: Callable[[], object]


@dataclass(frozen=True)
class Spread:
    """A figure over repetitions: its median, min-max and quartiles."""

    median: float
    low: float
    high: float
    q1: float
    q3: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        if not values:
            raise ValueError("a spread needs at least one value")
        ordered = sorted(values)
        if len(ordered) > 1:
            q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        else:
            q1 = q3 = ordered[0]
        return cls(statistics.median(ordered), ordered[0], ordered[-1], q1, q3)

    def as_dict(self, digits: int = 3) -> dict[str, float]:
        return {k: round(getattr(self, k), digits) for k in ("median", "low", "high", "q1", "q3")}


@dataclass
class BenchRow:
    case: str
    elements: int
    threads: int
    peer: str
    peer_version: str  # "ml_dtypes 0.7.0": printed beside every ratio
    samples: dict[str, list[float]]  # ms per call, per run kind, one per repetition
    order: list[str] = field(default_factory=list)  # the runs as they ran (after the warm-up)
    cpu_samples: dict[str, list[float]] = field(default_factory=dict)  # CPU ms: 1-thread oracle, peer

    @property
    def repeats(self) -> int:
        return len(self.samples[PEER])

    def _ms(self, kind: str) -> float:
        return statistics.median(self.samples[kind])

    @property
    def oracle_1thread_ms(self) -> float:
        return self._ms(ONE_THREAD)

    @property
    def oracle_ms(self) -> float:
        return self._ms(THREADS)

    @property
    def peer_ms(self) -> float:
        return self._ms(PEER)

    def _per_repeat(self, over: str, under: str) -> Spread:
        return Spread.of([a / b for a, b in zip(self.samples[over], self.samples[under])])

    @property
    def ratio_1thread_spread(self) -> Spread:
        """peer time / oracle time on one thread, per repetition."""
        return self._per_repeat(PEER, ONE_THREAD)

    @property
    def ratio_spread(self) -> Spread:
        """peer time / oracle time on every thread, per repetition."""
        return self._per_repeat(PEER, THREADS)

    @property
    def thread_speedup_spread(self) -> Spread:
        """oracle time on one thread / on every thread, per repetition."""
        return self._per_repeat(ONE_THREAD, THREADS)

    @property
    def cpu_ratio_1thread_spread(self) -> Spread | None:
        """peer CPU time / one-thread oracle CPU time, per repetition (both in one thread)."""
        if not self.cpu_samples or 0.0 in self.cpu_samples[ONE_THREAD]:
            return None  # a clock too coarse for this size says nothing
        return Spread.of([a / b for a, b in zip(self.cpu_samples[PEER], self.cpu_samples[ONE_THREAD])])

    @property
    def machine_speedup_spread(self) -> Spread | None:
        """The machine reference's time on one thread / on every thread, per repetition."""
        return self._per_repeat(MACHINE_ONE, MACHINE) if MACHINE in self.samples else None

    @property
    def ratio_1thread(self) -> float:
        return self.ratio_1thread_spread.median

    @property
    def ratio(self) -> float:
        return self.ratio_spread.median

    def as_dict(self) -> dict[str, object]:
        return {
            "case": self.case,
            "elements": self.elements,
            "threads": self.threads,
            "repeats": self.repeats,
            "peer": self.peer,
            "peer_version": self.peer_version,
            "oracle_1thread_ms": round(self.oracle_1thread_ms, 3),
            "oracle_ms": round(self.oracle_ms, 3),
            "peer_ms": round(self.peer_ms, 3),
            "ratio_1thread": round(self.ratio_1thread, 2),
            "ratio": round(self.ratio, 2),
            "ratio_1thread_spread": self.ratio_1thread_spread.as_dict(),
            "ratio_spread": self.ratio_spread.as_dict(),
            "thread_speedup": self.thread_speedup_spread.as_dict(),
            "machine_thread_speedup": None if self.machine_speedup_spread is None else self.machine_speedup_spread.as_dict(),
            "cpu_ratio_1thread": None if self.cpu_ratio_1thread_spread is None else self.cpu_ratio_1thread_spread.as_dict(),
            "cpu_samples_ms": {k: [round(v, 3) for v in vs] for k, vs in self.cpu_samples.items()},
            "samples_ms": {k: [round(v, 3) for v in vs] for k, vs in self.samples.items()},
            "order": list(self.order),
        }


@contextmanager
def oracle_threads(count: int | None) -> Iterator[None]:
    """MXGATE_THREADS=count inside (None: unset, every core), restored after."""
    previous = os.environ.get("MXGATE_THREADS")
    if count is None:
        os.environ.pop("MXGATE_THREADS", None)
    else:
        os.environ["MXGATE_THREADS"] = str(count)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("MXGATE_THREADS", None)
        else:
            os.environ["MXGATE_THREADS"] = previous


def _loops(function: Callable[[], object], clock: Callable[[], float], min_sample_s: float) -> int:
    """Warm up (caches, lazily built tables, thread pools) and size a sample's loop from it."""
    start = clock()
    function()
    once = clock() - start
    return 1 if once >= min_sample_s or once <= 0 else math.ceil(min_sample_s / once)


def _sample_ms(function: Callable[[], object], loops: int, clock: Callable[[], float],
               cpu_clock: Callable[[], float]) -> tuple[float, float]:
    """(wall ms, this thread's CPU ms) per call."""
    start, cpu = clock(), cpu_clock()
    for _ in range(loops):
        function()
    return (clock() - start) / loops * 1e3, (cpu_clock() - cpu) / loops * 1e3


def measure(case: Case, elements: int, repeats: int, peer_version: str, *,
            clock: Callable[[], float] = time.perf_counter, cpu_clock: Callable[[], float] = time.thread_time,
            min_sample_s: float = MIN_SAMPLE_S,
            machine: tuple[Callable[[], object], Callable[[], object]] | None = None) -> BenchRow:
    """One case: a warm-up of each run, then ``repeats`` repetitions of (1 thread, every
    thread, peer), interleaved so that each repetition's ratios come from neighbouring runs.

    machine: (one thread, every thread) of work that scales perfectly where cores are free;
    run after the peer in each repetition, it says how much a second thread could give then.
    The calling thread's CPU time is kept beside the wall time: the one-thread oracle and the
    peer run entirely in it, so their CPU-time ratio leaves out the time other processes took.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    from mxgate.oracle.parallel import thread_count

    threads = thread_count()
    runs: dict[str, tuple[Callable[[], object], int | None]] = {  # kind: (call, MXGATE_THREADS)
        ONE_THREAD: (case.ours, 1),
        THREADS: (case.ours, None),
        PEER: (case.peer, None),
    }
    if machine is not None:
        runs[MACHINE_ONE] = (machine[0], None)
        runs[MACHINE] = (machine[1], None)
    order_of_repeat = tuple(runs)
    loops = {}
    for kind in order_of_repeat:
        function, count = runs[kind]
        with oracle_threads(count):
            loops[kind] = _loops(function, clock, min_sample_s)
    samples: dict[str, list[float]] = {kind: [] for kind in order_of_repeat}
    cpu: dict[str, list[float]] = {kind: [] for kind in (ONE_THREAD, PEER)}
    order: list[str] = []
    for _ in range(repeats):
        for kind in order_of_repeat:
            function, count = runs[kind]
            with oracle_threads(count):
                wall, own = _sample_ms(function, loops[kind], clock, cpu_clock)
            samples[kind].append(wall)
            if kind in cpu:
                cpu[kind].append(own)
            order.append(kind)
    return BenchRow(case.name, elements, threads, case.peer_name, peer_version, samples, order, cpu)


def default_cases(x: np.ndarray, ml_dtypes: object) -> list[Case]:
    """The oracle's hot paths on x, each against the ml_dtypes cast closest to its work."""
    return [
        Case("mx.quantize (codes + scales)", lambda: oracle.quantize_mx(x, "gfx950"),
             "astype(float4_e2m1fn), no scaling", lambda: x.astype(ml_dtypes.float4_e2m1fn)),
        Case("e2m1.encode (elements)", lambda: oracle.encode_e2m1(x, "gfx950"),
             "astype(float4_e2m1fn)", lambda: x.astype(ml_dtypes.float4_e2m1fn)),
        Case(str(OpName.E4M3FN_ENCODE), lambda: oracle.encode_e4m3(x, "fn"),
             "astype(float8_e4m3fn)", lambda: x.astype(ml_dtypes.float8_e4m3fn)),
        Case(str(OpName.E4M3FNUZ_ENCODE), lambda: oracle.encode_e4m3(x, "fnuz"),
             "astype(float8_e4m3fnuz)", lambda: x.astype(ml_dtypes.float8_e4m3fnuz)),
        Case(str(OpName.BF16_ROUND), lambda: oracle.bf16_bits(x),
             "astype(bfloat16)", lambda: x.astype(ml_dtypes.bfloat16)),
    ]


def machine_reference(threads: int) -> tuple[Callable[[], object], Callable[[], object]]:
    """(one thread, ``threads`` threads) of the same in-cache NumPy work, no oracle in it:
    square roots over private 256 KiB arrays, which release the GIL and need no memory
    bandwidth, so the second form runs ``threads`` times faster exactly when cores are free.

    Where the pool has a thread for every CPU this process may use, each task pins the pool
    thread that runs it to its own CPU: left to the scheduler, these millisecond tasks were
    woken on the caller's CPU one after the other, and the figure read 1x whatever the CPUs
    allowed. With more CPUs than threads, choosing CPUs could pick busy ones: no pinning."""
    from concurrent.futures import ThreadPoolExecutor

    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else []
    cpus = allowed if 0 < len(allowed) <= threads else []
    arrays = [np.ones(1 << 16, np.float32) for _ in range(threads)]
    passes = 64
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mxgate-bench")

    def work(a: np.ndarray, count: int) -> None:
        for _ in range(count):
            np.sqrt(a, out=a)

    def pinned(index: int, a: np.ndarray) -> None:
        if cpus:  # 0: the calling thread, the pool's own (never the caller's)
            try:
                os.sched_setaffinity(0, {cpus[index % len(cpus)]})
            except OSError:  # that CPU left the allowed set since: run where the scheduler puts it
                pass
        work(a, passes)

    def one() -> None:
        for a in arrays:
            work(a, passes)

    def many() -> None:
        for future in [pool.submit(pinned, i, a) for i, a in enumerate(arrays)]:
            future.result()

    return one, many


def bench_input(log2_size: int, seed: int) -> np.ndarray:
    """2^log2_size float32 N(0, 4^2) values from the seed."""
    rng = np.random.Generator(np.random.PCG64(seed))
    return rng.standard_normal(1 << log2_size, dtype=np.float32) * np.float32(4.0)


def run_bench(log2_size: int = 24, repeats: int = 7, seed: int = 20261129,
              cases: list[Case] | None = None) -> list[BenchRow]:
    """Benchmark the oracle's codecs against ml_dtypes on 2^log2_size float32 N(0, 4^2) values."""
    ml_dtypes = require("ml_dtypes", "the benchmark (its peer is ml_dtypes' casts)")
    version = f"ml_dtypes {ml_dtypes.__version__}"
    x = bench_input(log2_size, seed)
    chosen = default_cases(x, ml_dtypes) if cases is None else cases
    from mxgate.oracle.parallel import thread_count

    machine = machine_reference(thread_count())
    return [measure(case, x.size, repeats, version, machine=machine) for case in chosen]


def _ratio_cell(spread: Spread, version: str) -> str:
    return f"{spread.median:.2f}x ({spread.low:.2f}-{spread.high:.2f}) vs {version}"


def _spread_cell(spread: Spread) -> str:
    return f"{spread.median:.2f}x ({spread.low:.2f}-{spread.high:.2f})"


def format_table(rows: list[BenchRow]) -> str:
    """Medians of ``repeats`` interleaved repetitions; ratios with their min-max."""
    t = rows[0].threads if rows else 1
    header = (f"| case | elements | oracle 1 thread ms | oracle {t} threads ms | peer | peer ms "
              f"| ratio 1 thread (min-max) | ratio {t} threads (min-max) | CPU-time ratio 1 thread (min-max) "
              f"| {t} threads / 1 (min-max) | machine {t} threads / 1 (min-max) |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        machine, cpu = r.machine_speedup_spread, r.cpu_ratio_1thread_spread
        lines.append(
            f"| {r.case} | {r.elements:,} | {r.oracle_1thread_ms:.1f} | {r.oracle_ms:.1f} | "
            f"{r.peer_version} {r.peer} | {r.peer_ms:.1f} | "
            f"{_ratio_cell(r.ratio_1thread_spread, r.peer_version)} | {_ratio_cell(r.ratio_spread, r.peer_version)} | "
            f"{'-' if cpu is None else _ratio_cell(cpu, r.peer_version)} | {_spread_cell(r.thread_speedup_spread)} | {'-' if machine is None else _spread_cell(machine)} |"
        )
    return "\n".join(lines)
