"""Optional packages a command needs: checked before any work, named in one clear error."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(package: str, purpose: str) -> ModuleType:
    """Import ``package``; an ImportError saying that ``purpose`` needs it (and how to get
    it) when it is not installed or cannot be imported."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise ImportError(f"{purpose} needs the {package} package, which cannot be imported "
                          f"({' '.join(str(exc).split())}); install it: pip install {package}",
                          name=package) from None
