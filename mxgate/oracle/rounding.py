"""Round-to-grid as table lookup, the shared engine of the E2M1 and E4M3 encoders.

A float32 rounds to a small format with m mantissa bits by looking at its sign, exponent and the
top (m + 1) mantissa bits (value bits plus the guard bit) and at whether any lower bit is set
(sticky). Every midpoint of E2M1 and E4M3 has at most m + 1 mantissa bits, so these
``keep_bits`` + 1 bits decide the result exactly. The table is built once per (format, profile)
by rounding one representative of each class in float64, where every value involved is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mxgate.oracle.parallel import run_blocks, scratch
from mxgate.oracle.xp import is_numpy, namespace, srl, take

CHUNK = 1 << 17  # elements per pass: temporaries stay in L2, few Python calls per element (measured)
BLOCK = 1 << 20  # elements per block shared out to the threads (parallel.run_blocks)
DEVICE_CHUNK = 1 << 26  # elements per pass off NumPy: bounds the int64 index temporaries


@dataclass(frozen=True)
class Classes:
    """Per representative: magnitude index on the grid and the special-case flags."""

    index: np.ndarray  # int64 position on the ascending magnitude grid
    negative: np.ndarray  # sign bit set
    is_nan: np.ndarray
    is_inf: np.ndarray
    overflow: np.ndarray  # rounded past the largest finite magnitude (finite input)
    bits: np.ndarray  # the representative's float32 bits (for payload-dependent NaN rules)


def representatives(keep_bits: int) -> np.ndarray:
    """One float32 bit pattern per table entry: top ``keep_bits`` bits, then the sticky bit."""
    shift = 32 - keep_bits
    top = np.arange(1 << keep_bits, dtype=np.uint64) << np.uint64(shift)
    reps = np.empty(2 << keep_bits, dtype=np.uint64)
    reps[0::2] = top
    reps[1::2] = top | np.uint64(1)
    return reps.astype(np.uint32)


def classify(keep_bits: int, grid: np.ndarray, overflow_next: float, tie: str) -> Classes:
    """Round every representative's magnitude to ``grid`` under the tie rule.

    grid: ascending float64 magnitudes (index = code magnitude); overflow_next: the magnitude
    the format would have next with an unbounded exponent (decides ties at the top).
    tie: even (even index), zero (smaller magnitude), away (larger), down (toward -inf).
    """
    bits = representatives(keep_bits)
    with np.errstate(invalid="ignore"):  # signalling NaN representatives
        values = bits.view(np.float32).astype(np.float64)
    negative = (bits >> np.uint32(31)).astype(bool)
    is_nan = np.isnan(values)
    is_inf = np.isinf(values)
    magnitude = np.where(is_nan | is_inf, 0.0, np.abs(values))
    ext = np.append(grid, overflow_next)
    upper = np.clip(np.searchsorted(ext, magnitude, side="left"), 1, len(ext) - 1)
    lower = upper - 1
    on_grid = ext[upper] == magnitude
    mid = (ext[lower] + ext[upper]) / 2  # exact: grid values are short binary fractions
    above = magnitude > mid
    tie_point = magnitude == mid
    if tie == "even":
        tie_up = (upper % 2) == 0
    elif tie == "zero":
        tie_up = np.zeros_like(tie_point)
    elif tie == "away":
        tie_up = np.ones_like(tie_point)
    elif tie == "down":
        tie_up = negative
    else:
        raise ValueError(f"tie must be one of 'even', 'zero', 'away', 'down'; got {tie!r}")
    index = np.where(on_grid | above | (tie_point & tie_up), upper, lower)
    beyond = magnitude > ext[-1]  # past the hypothetical next value: overflow for sure
    overflow = (index >= len(grid)) | beyond
    return Classes(np.minimum(index, len(grid) - 1), negative, is_nan, is_inf, overflow, bits)


def lookup(u: Any, table: Any, keep_bits: int, out: np.ndarray | None = None) -> Any:
    """Apply a rounding table to float32 bit patterns ``u`` (uint32 or int32, any shape).

    The index is (u >> shift) with its lowest bit (the first dropped bit) OR'd with "any lower
    bit set", the sticky bit. ``table`` is in u's namespace and on its device (``table_on``);
    out (NumPy only): a result buffer of u's size.
    """
    xp = namespace(u, table)
    if not is_numpy(xp):
        shift = 31 - keep_bits
        flat = xp.reshape(u, (-1,))
        result = xp.empty(flat.shape, dtype=table.dtype, device=flat.device)
        for start in range(0, flat.shape[0], DEVICE_CHUNK):
            part = flat[start:start + DEVICE_CHUNK]
            index = srl(part, shift) | xp.astype((part & ((1 << shift) - 1)) != 0, xp.int32)
            result[start:start + part.shape[0]] = take(table, index)
        return xp.reshape(result, u.shape)
    flat = np.ascontiguousarray(u).reshape(-1)
    if flat.dtype != np.uint32:
        flat = flat.view(np.uint32) if flat.dtype == np.int32 else flat.astype(np.uint32)
    result = np.empty(flat.shape, dtype=table.dtype) if out is None else out.reshape(-1)
    # (u & mask) + mask carries into bit ``shift`` exactly when some bit under it is set, and
    # stays below 2^(shift+1): OR-ing it into u sets that bit, and only it, as the sticky bit:
    # four in-place passes on a reused buffer, no boolean temporary.
    shift = np.uint32(31 - keep_bits)
    sticky_mask = np.uint32((1 << (31 - keep_bits)) - 1)

    def work(first: int, last: int) -> None:
        index = scratch("rounding.index", min(CHUNK, last - first), np.uint32)
        wide = scratch("rounding.wide", min(CHUNK, last - first), np.intp)  # take's own index type
        for start in range(first, last, CHUNK):
            stop = min(start + CHUNK, last)
            part = flat[start:stop]
            i, w = index[: stop - start], wide[: stop - start]
            np.bitwise_and(part, sticky_mask, out=i)
            i += sticky_mask
            i |= part
            i >>= shift
            np.copyto(w, i)
            np.take(table, w, out=result[start:stop], mode="wrap")  # every index < table.size

    run_blocks(flat.size, work, BLOCK)
    return result.reshape(np.shape(u))
