"""SIGTERM is an interruption like SIGINT: the run stops, its reports are written and marked
interrupted, its workers are ended, and the exit status says which signal (143, 130)."""

from __future__ import annotations

import signal
from typing import Any

import pytest

_SIGNAL = pytest.StashKey[str]()


def install(config: pytest.Config) -> None:
    """Turn SIGTERM into the KeyboardInterrupt pytest already handles, remembering which it was."""

    def terminated(number: int, frame: Any) -> None:
        config.stash[_SIGNAL] = "SIGTERM"
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the run at once
        raise KeyboardInterrupt("SIGTERM")

    try:
        signal.signal(signal.SIGTERM, terminated)
    except ValueError:  # not the main thread: pytest run from a thread keeps the default
        pass


def which(config: pytest.Config, exitstatus: int) -> str | None:
    """'SIGTERM', 'SIGINT' or None: what interrupted this run."""
    if _SIGNAL in config.stash:
        return config.stash[_SIGNAL]
    return "SIGINT" if int(exitstatus) == int(pytest.ExitCode.INTERRUPTED) else None
