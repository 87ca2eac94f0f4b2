"""Block quantizers whose bytes differ where SPEC 3 leaves them open, for tests/test_identify_open.py.

Each is the oracle's own op under gfx950 (the profile it declares) with planted element codes:

- ``scale_255_codes``: in every block whose scale byte is 0xFF, element i gets code i mod 16
  (mx.quantize) or i (mx.quantize_e4m3fn), a pattern no nan_scale or NaN rule gives. The gate
  rates that acceptable (``judge_mx_blocks``): identify must call those units open and match;
- ``scale_255_codes_and_one_more``: the same, and in every block whose scale byte is 0x7F (2^0)
  element 31's code has its lowest bit flipped: a difference the contract does not leave open.
"""

from __future__ import annotations

import numpy as np

from mxgate import oracle
from mxgate.kernels.functions import backend_from_functions, kernel
from mxgate.op_table import OpName
from mxgate.oracle.geometry import GROUP

PROFILE = "gfx950"
SCALE_255, SCALE_ONE = 0xFF, 0x7F


def _plant(codes: np.ndarray, e8m0: np.ndarray, modulus: int, flip_one: bool) -> np.ndarray:
    """Codes [blocks, 32] with the planted ones; ``e8m0`` [blocks] the oracle's scale bytes."""
    out = codes.copy()
    out[e8m0 == SCALE_255] = (np.arange(GROUP) % modulus).astype(out.dtype)
    if flip_one:
        out[e8m0 == SCALE_ONE, GROUP - 1] ^= 1
    return out


def _mx(flip_one: bool):
    def run(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        packed, e8m0 = oracle.quantize_mx(x, PROFILE)
        codes = oracle.unpack_nibbles(packed).reshape(-1, GROUP)
        codes = _plant(codes, e8m0.reshape(-1), 16, flip_one)
        return oracle.pack_nibbles(codes.reshape(np.shape(x))), e8m0

    return run


def mxfp8_open(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    codes, e8m0 = oracle.quantize_mx_e4m3fn(x, PROFILE)
    planted = _plant(np.asarray(codes).reshape(-1, GROUP), e8m0.reshape(-1), GROUP, False)
    return planted.reshape(np.shape(codes)), e8m0


mx_open, mx_open_and_one_more = _mx(False), _mx(True)
scale_255_codes = backend_from_functions(
    "planted-scale-255-codes", kernel(OpName.MX_QUANTIZE, mx_open, profile=PROFILE),
    kernel(OpName.MX_QUANTIZE_E4M3FN, mxfp8_open, profile=PROFILE))
scale_255_codes_and_one_more = backend_from_functions(
    "planted-scale-255-codes-and-one-more", kernel(OpName.MX_QUANTIZE, mx_open_and_one_more, profile=PROFILE))
