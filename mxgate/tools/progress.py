"""A dependency-free progress line for long runs (stderr, rewritten in place on a terminal)."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, label: str, enabled: bool = True) -> None:
        self.total = total
        self.label = label
        self.done = 0
        self.enabled = enabled
        self.start = time.perf_counter()
        self._tty = sys.stderr.isatty()
        self._last_print = 0.0

    def advance(self, steps: int = 1, note: str = "") -> None:
        self.done += steps
        if not self.enabled:
            return
        now = time.perf_counter()
        if not self._tty and now - self._last_print < 5.0 and self.done < self.total:
            return  # logs get one line every few seconds, terminals a live bar
        self._last_print = now
        elapsed = now - self.start
        fraction = self.done / self.total if self.total else 1.0
        eta = elapsed / fraction - elapsed if fraction else 0.0
        bar = "#" * int(fraction * 30)
        line = f"{self.label} [{bar:<30}] {self.done}/{self.total} {elapsed:6.1f}s eta {eta:5.1f}s {note}"
        sys.stderr.write(("\r" + line) if self._tty else (line + "\n"))
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self._tty:
            sys.stderr.write("\n")
            sys.stderr.flush()
