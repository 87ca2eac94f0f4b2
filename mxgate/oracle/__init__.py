"""The pure-NumPy oracle: bit-exact emulation of the shipped FP4/FP8 quantizers.

No torch or triton import lives under this package, and no platform transcendental
(log2, exp, sin, cos) decides an output bit.
"""

from mxgate.oracle import profiles, scales
from mxgate.oracle.formats import (
    bf16_bits,
    bf16_to_f32,
    decode_e2m1,
    decode_e4m3,
    decode_e8m0,
    encode_e2m1,
    encode_e4m3,
    pack_nibbles,
    round_bf16,
    unpack_nibbles,
)
from mxgate.oracle.mx import dequantize_mx, quantize_mx
from mxgate.oracle.scales import e8m0_scale

__all__ = [
    "bf16_bits",
    "bf16_to_f32",
    "decode_e2m1",
    "decode_e4m3",
    "decode_e8m0",
    "dequantize_mx",
    "e8m0_scale",
    "encode_e2m1",
    "encode_e4m3",
    "pack_nibbles",
    "profiles",
    "quantize_mx",
    "round_bf16",
    "scales",
    "unpack_nibbles",
]


def __getattr__(name: str):
    # Submodules written alongside the core load on first use, so a partial install still imports.
    if name in ("layouts", "ops", "exact"):
        import importlib

        return importlib.import_module(f"mxgate.oracle.{name}")
    raise AttributeError(f"module 'mxgate.oracle' has no attribute {name!r}")
