"""Split a vectorised loop over contiguous ranges on a few threads.

NumPy releases the GIL inside ufunc and take loops, so cache-sized chunks processed by
several threads scale with cores. Each range writes its own slice of the output: the
result is the same bytes whatever the thread count and whichever thread runs which range.
"""

from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Callable

import numpy as np

MIN_PER_THREAD = 1 << 20  # below this, thread start-up costs more than it saves

_inside = threading.local()  # set while a thread runs work for run_ranges / run_blocks


def thread_count() -> int:
    """MXGATE_THREADS, else the cores this process may use (at most 8)."""
    configured = os.environ.get("MXGATE_THREADS")
    if configured:
        if not configured.isdigit() or int(configured) < 1:
            raise ValueError(f"MXGATE_THREADS must be a positive integer, got {configured!r}")
        return int(configured)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without affinity
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


@cache
def _pool(workers: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mxgate")


def _nested() -> bool:
    # A worker that waits on its own pool could deadlock it: nested calls run inline.
    return getattr(_inside, "active", False)


def _marked(function: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        previous = getattr(_inside, "active", False)
        _inside.active = True
        try:
            function()
        finally:
            _inside.active = previous

    return run


def run_ranges(total: int, work: Callable[[int, int], None], weight: int = 1) -> None:
    """Call work(start, stop) over [0, total) split into contiguous ranges, one per thread.

    weight: elements per item, so the split considers the real amount of data.
    """
    threads = min(thread_count(), max(1, (total * weight) // MIN_PER_THREAD))
    if threads <= 1 or _nested():
        work(0, total)
        return
    bounds = [total * i // threads for i in range(threads + 1)]
    futures = [_pool(threads).submit(_marked(lambda i=i: work(bounds[i], bounds[i + 1]))) for i in range(threads)]
    for future in futures:
        future.result()


def run_blocks(total: int, work: Callable[[int, int], None], block: int) -> None:
    """Call work(start, stop) over [0, total) in blocks of ``block`` items, shared out on demand.

    Threads (the caller's among them) take the next block when they finish one, so a thread
    that the machine's other load slows down holds the rest back by at most one block, where
    fixed equal ranges would wait for its whole share. ``block`` should hold enough data to
    outweigh a task hand-off (MIN_PER_THREAD elements or so).
    """
    if total <= 0:
        return
    block = max(1, block)
    blocks = -(-total // block)
    threads = min(thread_count(), blocks)
    if threads <= 1 or _nested():
        for start in range(0, total, block):
            work(start, min(start + block, total))
        return
    claims = itertools.count()  # next() on a count is atomic under the GIL
    failed = threading.Event()

    def drain() -> None:
        for index in claims:
            if index >= blocks or failed.is_set():
                return
            try:
                work(index * block, min((index + 1) * block, total))
            except BaseException:
                failed.set()  # the others stop at their next block; the error surfaces below
                raise

    futures = [_pool(threads - 1).submit(_marked(drain)) for _ in range(threads - 1)]
    try:
        _marked(drain)()
    finally:
        for future in futures:
            future.exception()  # wait for every helper before reporting
    for future in futures:
        future.result()


_scratch = threading.local()


def scratch(tag: str, size: int, dtype: type) -> np.ndarray:
    """This thread's reusable 1-d buffer ``tag`` of at least ``size`` items (contents undefined).

    Fresh temporaries page-fault on every chunk; a buffer kept per thread and tag is warm in
    cache. Each caller uses its own tags, and never holds one across a call that uses the same.
    """
    buffers = getattr(_scratch, "buffers", None)
    if buffers is None:
        buffers = _scratch.buffers = {}
    key = (tag, np.dtype(dtype).str)
    have = buffers.get(key)
    if have is None or have.size < size:
        have = buffers[key] = np.empty(max(size, 1), dtype=dtype)
    return have[:size]
