"""The oracle's dequantize_mx (it runs on tensors), re-exported for the twin modules that still
import it from here; the twin's quantize_mx is ``mxgate.twin.quantize``."""

from mxgate.oracle.mx import dequantize_mx  # noqa: F401 - re-export
