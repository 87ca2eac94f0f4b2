"""Number-format codecs of the twin: E2M1, E8M0, E4M3FN/E4M3FNUZ, BF16 on torch tensors."""

from mxgate.twin.formats.bf16 import bf16_bits, bf16_to_f32, round_bf16
from mxgate.twin.formats.e2m1 import decode_e2m1, encode_e2m1, pack_nibbles, unpack_nibbles
from mxgate.twin.formats.e4m3 import decode_e4m3, encode_e4m3
from mxgate.twin.formats.e8m0 import decode_e8m0

__all__ = [
    "bf16_bits", "bf16_to_f32", "decode_e2m1", "decode_e4m3", "decode_e8m0", "encode_e2m1",
    "encode_e4m3", "pack_nibbles", "round_bf16", "unpack_nibbles",
]
