"""mxgate: bit-exact reference and conformance suite for FP4/FP8 indexer quantization kernels."""

import importlib

from mxgate import oracle

__version__ = "0.1.0"
__all__ = ["oracle", "kernels", "explain", "vectors", "conformance", "__version__"]


def __getattr__(name: str):
    # Heavier parts load on first use, so ``import mxgate`` stays NumPy-only.
    if name in ("kernels", "explain", "vectors", "conformance"):
        return importlib.import_module(f"mxgate.{name}")
    raise AttributeError(f"module 'mxgate' has no attribute {name!r}")
