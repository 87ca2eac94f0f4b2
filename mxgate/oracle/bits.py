"""uint32 bit views of float32 NumPy arrays, for the NumPy branches' in-place uint32 passes
(code for any namespace uses ``mxgate.oracle.xp``'s int32 views), and sets of bit patterns."""

from __future__ import annotations

import numpy as np

ABS32 = np.uint32(0x7FFFFFFF)
EXP32 = np.uint32(0x7F800000)


def f32_bits(x: np.ndarray) -> np.ndarray:
    """The uint32 bit patterns of a float32 array (a view, no copy)."""
    # np.require keeps 0-d arrays 0-d (ascontiguousarray would make them 1-d)
    return np.require(x, dtype=np.float32, requirements="C").view(np.uint32)


def unique_patterns(a: np.ndarray, return_index: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``np.unique`` of an integer array (flattened) by sorting: NumPy 2.3+ hashes integers
    instead, which takes about a second for 2^20 uint32 patterns where a sort takes milliseconds.
    return_index: also the index of each value's first occurrence, as ``np.unique`` gives it."""
    flat = np.asarray(a).reshape(-1)
    if not np.issubdtype(flat.dtype, np.integer):
        raise TypeError(f"unique_patterns takes integer bit patterns, got {flat.dtype}")
    order = np.argsort(flat, kind="stable") if return_index else None
    ordered = flat[order] if order is not None else np.sort(flat)
    first = np.empty(ordered.shape, dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return (ordered[first], order[first]) if order is not None else ordered[first]
