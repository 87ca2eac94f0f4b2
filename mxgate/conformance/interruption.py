"""SIGTERM is an interruption like SIGINT: the run stops, its reports are written and marked
interrupted, its workers are ended, and the exit status says which signal (143, 130).

The handler raises KeyboardInterrupt where the signal lands and also tells the isolation layer
(``isolation.request_stop``): a raise that lands in a finalizer or a broad except is lost, and
then the next wait on a worker raises it again instead of waiting out a hung kernel."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from mxgate.kernels import isolation

_SIGNAL = pytest.StashKey[str]()


def install(config: pytest.Config) -> None:
    """Turn SIGTERM into the KeyboardInterrupt pytest already handles, and remember which
    signal it was (pytest's own INTERRUPTED status also means "errors during collection", so
    the signal is recorded where it arrives, never inferred from the status)."""

    def terminated(number: int, frame: Any) -> None:  # noqa: ARG001
        config.stash[_SIGNAL] = "SIGTERM"
        isolation.request_stop("SIGTERM")
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the run at once
        raise KeyboardInterrupt("SIGTERM")

    def interrupted(number: int, frame: Any) -> None:  # noqa: ARG001
        config.stash.setdefault(_SIGNAL, "SIGINT")
        isolation.request_stop("SIGINT")
        raise KeyboardInterrupt

    isolation.clear_stop()  # a run started after an interrupted one in this process
    try:
        signal.signal(signal.SIGTERM, terminated)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, interrupted)
    except ValueError:  # not the main thread: pytest run from a thread keeps the default
        pass


def which(config: pytest.Config) -> str | None:
    """'SIGTERM', 'SIGINT' or None: the signal that interrupted this run, if one did."""
    return config.stash.get(_SIGNAL, "") or None
