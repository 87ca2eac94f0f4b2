"""The oracle on torch tensors (CUDA and CPU): same bits, on the device.

``quantize_mx`` and the device modules import torch (``mxgate.twin.sweep`` at its first sweep, so
that the gate's process can read a sweep's result without it); ``mxgate`` and ``mxgate.oracle``
never do. The codecs,
scales and ``dequantize_mx`` here are the oracle's own functions (written once against an array
namespace, they run on tensors as given); what is the twin's own is device-specific: the fused
Triton quantizer behind ``quantize_mx`` on CUDA, its scale tables, the device sweeps and the
gate's reference on a device (``reference.on_device``).
tests/test_twin.py runs each function on NumPy and on tensors and compares the bytes.

    from mxgate import twin
    codes = twin.encode_e2m1(x_cuda_f32, "gfx950")
    packed, scales = twin.quantize_mx(x_cuda, "gfx950")      # fused Triton kernel on CUDA
    oracle.layouts.get("aiter-fp4-kv").scatter(buf, packed, slots=slots)  # buf: a cuda tensor
"""

from typing import TYPE_CHECKING

from mxgate.oracle import (
    bf16_bits,
    bf16_to_f32,
    decode_e2m1,
    decode_e4m3,
    decode_e8m0,
    dequantize_mx,
    e8m0_scale,
    encode_e2m1,
    encode_e4m3,
    pack_nibbles,
    round_bf16,
    unpack_nibbles,
)

if TYPE_CHECKING:
    from mxgate.twin.quantize import quantize_mx


def __getattr__(name: str):
    # quantize_mx brings torch (and, on CUDA, triton): imported at first use, so that the gate's
    # process can take the device sweep's results (mxgate.twin.sweep) without torch
    if name == "quantize_mx":
        from mxgate.twin.quantize import quantize_mx

        return quantize_mx
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"quantize_mx"})


__all__ = [
    "bf16_bits", "bf16_to_f32", "decode_e2m1", "decode_e4m3", "decode_e8m0", "dequantize_mx",
    "e8m0_scale", "encode_e2m1", "encode_e4m3", "pack_nibbles", "quantize_mx",
    "round_bf16", "unpack_nibbles",
]
