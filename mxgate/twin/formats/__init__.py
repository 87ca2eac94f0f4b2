"""The oracle's codecs, re-exported for the twin modules that still import them from here (the
oracle's own functions run on tensors). ``bf16_to_f32`` also takes the int16 (or int32) views of
bf16 patterns those modules hold."""

import torch

from mxgate.oracle.formats import (  # noqa: F401 - re-exports
    bf16_bits,
    decode_e2m1,
    decode_e4m3,
    decode_e8m0,
    encode_e2m1,
    encode_e4m3,
    pack_nibbles,
    round_bf16,
    unpack_nibbles,
)
from mxgate.oracle.formats import bf16_to_f32 as _bf16_to_f32


def bf16_to_f32(bits: torch.Tensor) -> torch.Tensor:
    if isinstance(bits, torch.Tensor) and bits.dtype in (torch.int16, torch.int32):
        bits = bits.to(torch.int16).view(torch.uint16)  # the same 16 bits, as the oracle takes them
    return _bf16_to_f32(bits)
