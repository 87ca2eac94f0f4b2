"""uint32 bit views of float32 NumPy arrays, for the NumPy branches' in-place uint32 passes
(code for any namespace uses ``mxgate.oracle.xp``'s int32 views)."""

from __future__ import annotations

import numpy as np

ABS32 = np.uint32(0x7FFFFFFF)
EXP32 = np.uint32(0x7F800000)


def f32_bits(x: np.ndarray) -> np.ndarray:
    """The uint32 bit patterns of a float32 array (a view, no copy)."""
    # np.require keeps 0-d arrays 0-d (ascontiguousarray would make them 1-d)
    return np.require(x, dtype=np.float32, requirements="C").view(np.uint32)
