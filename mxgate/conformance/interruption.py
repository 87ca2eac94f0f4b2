"""SIGTERM is an interruption like SIGINT: the run stops, its reports are written and marked
interrupted, its workers are ended, and the exit status says which signal (143, 130)."""

from __future__ import annotations

import signal
from typing import Any

import pytest

_SIGNAL = pytest.StashKey[str]()


def install(config: pytest.Config) -> None:
    """Turn SIGTERM into the KeyboardInterrupt pytest already handles, remembering which it was."""

    def terminated(number: int, frame: Any) -> None:  # noqa: ARG001
        config.stash[_SIGNAL] = "SIGTERM"
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the run at once
        raise KeyboardInterrupt("SIGTERM")

    try:
        signal.signal(signal.SIGTERM, terminated)
    except ValueError:  # not the main thread: pytest run from a thread keeps the default
        pass


def which(config: pytest.Config, pytest_status: int | None = None) -> str | None:
    """'SIGTERM', 'SIGINT' or None: what interrupted this run (pytest's own status tells a
    SIGINT; ask once with it, when the session finishes, and later without)."""
    if _SIGNAL not in config.stash and pytest_status is not None:
        config.stash[_SIGNAL] = "SIGINT" if int(pytest_status) == int(pytest.ExitCode.INTERRUPTED) else ""
    return config.stash.get(_SIGNAL, "") or None
