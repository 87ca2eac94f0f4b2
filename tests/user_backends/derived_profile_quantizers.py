"""mx.quantize backends that declare a profile the golden vectors hold no result for
(aiter-ref-rceil, registered after the base table): one right, one with AITER's zero-quotient
scale byte (docs/findings/aiter.md 5b), for the vector test's live results."""

import numpy as np

from mxgate import oracle
from mxgate.kernels.functions import backend_from_functions, kernel

PROFILE = "aiter-ref-rceil"


def _right(x: np.ndarray):
    return oracle.quantize_mx(x, PROFILE)


def _zero_quotient_byte0(x: np.ndarray):
    """The profile's bytes, except byte 0x00 where 0 < amax and fl(amax / 6) is 0."""
    packed, e8m0 = oracle.quantize_mx(x, PROFILE)
    amax = np.abs(np.asarray(x, np.float32)).reshape(*e8m0.shape, 32).max(axis=-1)
    return packed, np.where((amax > 0) & (amax / np.float32(6) == 0), np.uint8(0), e8m0).astype(np.uint8)


right = backend_from_functions("derived-right", kernel("mx.quantize", _right, profile=PROFILE))
zero_quotient = backend_from_functions("derived-zero-quotient", kernel("mx.quantize", _zero_quotient_byte0,
                                                                       profile=PROFILE))
