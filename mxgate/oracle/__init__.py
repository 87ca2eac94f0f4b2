"""The pure-NumPy oracle: bit-exact emulation of the shipped FP4/FP8 quantizers.

No torch or triton import lives under this package, and no platform transcendental
(log2, exp, sin, cos) decides an output bit.
"""

from mxgate.oracle import formats, profiles, scales
from mxgate.oracle.formats import *  # noqa: F403 - the codecs are the oracle's own API
from mxgate.oracle.mx import dequantize_mx, quantize_mx, quantize_mx_e4m3fn
from mxgate.oracle.scales import e8m0_scale

# The layouts, the ops and the slow exact model, after the names above they import from here.
from mxgate.oracle import exact, layouts, ops  # noqa: E402

__all__ = sorted([*formats.__all__, "dequantize_mx", "e8m0_scale", "profiles", "quantize_mx", "quantize_mx_e4m3fn", "scales"])
