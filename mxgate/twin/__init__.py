"""The oracle's twin on torch tensors (CUDA and CPU): same bits, on the device.

Importing this package imports torch; ``mxgate`` and ``mxgate.oracle`` never do. Each module
mirrors its oracle counterpart and reads the same Profile fields; tests compare the two byte
for byte (tests/test_twin.py), on the CPU in CI and over every float32 input on a GPU.

    from mxgate import twin
    codes = twin.encode_e2m1(x_cuda_f32, "gfx950")
    packed, scales = twin.quantize_mx(x_cuda, "gfx950")      # fused Triton kernel on CUDA
    twin.layouts.get("aiter-fp4-kv").scatter(buf, packed, slots=slots)
"""

from mxgate.twin import layouts
from mxgate.twin.formats import (
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
from mxgate.twin.mx import dequantize_mx
from mxgate.twin.quantize import quantize_mx
from mxgate.twin.scales import e8m0_scale

__all__ = [
    "bf16_bits", "bf16_to_f32", "decode_e2m1", "decode_e4m3", "decode_e8m0", "dequantize_mx",
    "e8m0_scale", "encode_e2m1", "encode_e4m3", "layouts", "pack_nibbles", "quantize_mx",
    "round_bf16", "unpack_nibbles",
]
