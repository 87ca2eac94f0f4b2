"""Pin the current process to one core, for per-core benchmark figures."""

from __future__ import annotations

import os


def pin_one_core() -> str:
    """Restrict this process to its lowest allowed core; says what it did."""
    if hasattr(os, "sched_setaffinity"):
        core = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {core})
        return f"pinned to core {core}"
    return "not pinned (no sched_setaffinity)"
