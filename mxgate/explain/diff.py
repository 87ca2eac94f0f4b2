"""Differing bytes of two flat buffers, and their expansion into classified units."""

from __future__ import annotations

import numpy as np

_CHUNK = 1 << 24  # bytes compared per pass: bounds the temporary mask on huge buffers


def differing_offsets(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """Sorted int64 offsets where the flat buffers differ.

    Compared chunk by chunk so a multi-GiB buffer never needs a mask of its own size.
    """
    parts = []
    for start in range(0, expected.size, _CHUNK):
        stop = min(start + _CHUNK, expected.size)
        hit = np.flatnonzero(expected[start:stop] != actual[start:stop])
        if hit.size:
            parts.append(hit.astype(np.int64) + start)
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def expand_nibbles(eb: np.ndarray, ab: np.ndarray,
                   is_nibble: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(byte index, nibble) per unit: one unit per differing nibble of a 4-bit byte (low
    nibble first), one unit (nibble -1) per other byte."""
    x = eb ^ ab
    # Two slots per byte, low then high: the nonzero slots are the units, already in order.
    slots = np.empty((eb.size, 2), bool)
    slots[:, 0] = ~is_nibble | ((x & 0x0F) != 0)
    slots[:, 1] = is_nibble & ((x & 0xF0) != 0)
    unit = np.flatnonzero(slots.reshape(-1))
    byte = unit >> 1
    nibble = (unit & 1).astype(np.int8)
    if not is_nibble.all():
        nibble[~is_nibble[byte]] = -1
    return byte, nibble
