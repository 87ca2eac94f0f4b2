"""Bit-level views of float32 values (no arithmetic that could round)."""

from __future__ import annotations

import numpy as np

ABS32 = np.uint32(0x7FFFFFFF)
EXP32 = np.uint32(0x7F800000)
MANT32 = np.uint32(0x007FFFFF)


def f32_bits(x: np.ndarray) -> np.ndarray:
    """The uint32 bit patterns of a float32 array (a view, no copy)."""
    # np.require keeps 0-d arrays 0-d (ascontiguousarray would make them 1-d)
    return np.require(x, dtype=np.float32, requirements="C").view(np.uint32)


def pow2_f32(exponent: np.ndarray) -> np.ndarray:
    """2**exponent as float32 for integer exponents in [-149, 127], built from bits (exact)."""
    e = np.asarray(exponent, dtype=np.int64)
    if e.size and (e.min() < -149 or e.max() > 127):
        raise ValueError("exponent must lie in [-149, 127] for a float32 power of two")
    normal = np.left_shift(np.clip(e + 127, 1, 254), 23)
    subnormal = np.left_shift(np.int64(1), np.clip(e + 149, 0, 22))
    return np.where(e >= -126, normal, subnormal).astype(np.uint32).view(np.float32)
