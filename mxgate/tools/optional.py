"""Optional packages a command needs: checked before any work, named in one clear error."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from types import ModuleType


def require(package: str, purpose: str) -> ModuleType:
    """Import ``package``; an ImportError saying that ``purpose`` needs it (and how to get
    it) when it is not installed or cannot be imported."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise _missing(package, purpose, exc) from None


def require_installed(package: str, purpose: str) -> None:
    """``require`` without importing ``package`` here (the processes that use it import it):
    the same ImportError when it is not installed. A top-level name: a dotted one would import
    its parents to find it."""
    try:
        found = importlib.util.find_spec(package) is not None
    except (ImportError, ValueError) as exc:
        raise _missing(package, purpose, exc) from None
    if not found:
        raise _missing(package, purpose, ModuleNotFoundError(f"No module named {package!r}"))


def require_importable(package: str, purpose: str) -> None:
    """``require`` asked of a fresh interpreter of this Python (same environment), so that this
    process still does not import ``package``: for a command whose workers import it, to tell a
    broken installation (this ImportError) from a fault of the code that ran there."""
    done = subprocess.run([sys.executable, "-c", f"import {package}"], capture_output=True, text=True)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise _missing(package, purpose, ImportError(lines[-1] if lines else f"exit status {done.returncode}"))


def _missing(package: str, purpose: str, exc: Exception) -> ImportError:
    return ImportError(f"{purpose} needs the {package} package, which cannot be imported "
                       f"({' '.join(str(exc).split())}); install it: pip install {package}", name=package)
