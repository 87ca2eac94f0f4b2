"""Third-party imports without their import-time noise.

Importing torchao prints ``Failed to load .../_C_mxfp8...so`` for every CUDA extension it cannot
load on a CPU machine, and its enum registrations make torch log a ``register_constant()``
deprecation; other packages warn about their own deprecations. None of it is about the user's
kernel or mxgate's verdicts, and a newcomer cannot tell it from a real problem, so the adapters
import foreign packages through ``foreign_imports``. ``MXGATE_DEBUG=1`` (``mxgate --debug``)
shows everything again. An import that fails re-emits what it printed, so its cause is kept.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from types import ModuleType

DEBUG_ENV = "MXGATE_DEBUG"


def debug() -> bool:
    """True when ``MXGATE_DEBUG`` asks for every message of the packages mxgate imports."""
    return os.environ.get(DEBUG_ENV, "").strip() not in ("", "0")


@contextlib.contextmanager
def foreign_imports() -> Iterator[None]:
    """Inside: warnings, log records up to WARNING and Python-level stderr writes are dropped
    (unless ``debug()``); errors and exceptions pass through."""
    if debug():
        yield
        return
    captured = io.StringIO()
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # torchao and torch log their import-time notes as warnings
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(captured):
            warnings.simplefilter("ignore")
            yield
    except BaseException:
        sys.stderr.write(captured.getvalue())  # a failed import keeps what it said about why
        raise
    finally:
        logging.disable(previous)


def quiet_import(name: str) -> ModuleType:
    """``importlib.import_module(name)`` inside ``foreign_imports``."""
    with foreign_imports():
        return importlib.import_module(name)
