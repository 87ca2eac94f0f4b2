"""Repository-level pytest setup: load the mxgate plugin when it is not installed as an entry point,
and compile mxgate's bytecode once for the processes the tests start."""

from __future__ import annotations

import compileall
import sys
from importlib.metadata import entry_points
from pathlib import Path

if not any(ep.value == "mxgate.conformance.plugin" for ep in entry_points(group="pytest11")):
    pytest_plugins = ["mxgate.conformance.plugin"]


def pytest_configure(config) -> None:
    """Under PYTHONDONTWRITEBYTECODE an editable checkout has no bytecode, and each of the few
    hundred Python processes the tests start (gate runs, backend workers, CLI calls) compiled the
    package again: about 0.3 s of CPU each. Compiled once here, the children read it (the flag
    stops only writing). A site-packages install already has its bytecode from pip."""
    if hasattr(config, "workerinput") or not sys.flags.dont_write_bytecode:
        return
    package = Path(__file__).resolve().parent / "mxgate"
    if package.is_dir():
        compileall.compile_dir(str(package), quiet=2, workers=1)
