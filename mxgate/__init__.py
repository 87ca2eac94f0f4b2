"""mxgate: bit-exact reference and conformance suite for FP4/FP8 indexer quantization kernels."""

from mxgate import oracle

__version__ = "0.1.0"
__all__ = ["oracle", "__version__"]
