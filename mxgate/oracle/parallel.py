"""Split a vectorised loop over contiguous ranges on a few threads.

NumPy releases the GIL inside ufunc and take loops, so cache-sized chunks processed by
several threads scale with cores. Each range writes its own slice of the output: the
result is the same bytes whatever the thread count.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Callable

MIN_PER_THREAD = 1 << 20  # below this, thread start-up costs more than it saves


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


def run_ranges(total: int, work: Callable[[int, int], None], weight: int = 1) -> None:
    """Call work(start, stop) over [0, total) split into contiguous ranges, one per thread.

    weight: elements per item, so the split considers the real amount of data.
    """
    threads = min(thread_count(), max(1, (total * weight) // MIN_PER_THREAD))
    if threads <= 1:
        work(0, total)
        return
    bounds = [total * i // threads for i in range(threads + 1)]
    futures = [_pool(threads).submit(work, bounds[i], bounds[i + 1]) for i in range(threads)]
    for future in futures:
        future.result()
