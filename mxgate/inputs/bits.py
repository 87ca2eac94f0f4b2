"""Float32 bit-pattern helpers for building boundary-class inputs (exact, no rounding)."""

from __future__ import annotations

import numpy as np

F32_MAX = 0x7F7FFFFF
F32_INF = 0x7F800000
SIGN = 0x80000000


def f32(bits: list[int] | np.ndarray) -> np.ndarray:
    """float32 array from uint32 bit patterns."""
    return np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)


def bit(x: float) -> int:
    """The bit pattern of x rounded to float32."""
    return int(np.float32(x).view(np.uint32))


def neighbours(x: float, ulps: tuple[int, ...] = (-1, 0, 1)) -> list[int]:
    """Bit patterns of x moved by each count of ulps (x positive)."""
    return [bit(x) + u for u in ulps]


def negate(patterns: list[int]) -> list[int]:
    return [p ^ SIGN for p in patterns]


def pow2_bits(k: int) -> int:
    """Bits of 2^k for k in [-149, 127]."""
    return (k + 127) << 23 if k >= -126 else 1 << (k + 149)


def bf16_patterns() -> np.ndarray:
    """Every bf16 bit pattern as float32 bits (uint32), in order."""
    return np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)


def is_nan_bits(u: np.ndarray) -> np.ndarray:
    return (np.asarray(u, dtype=np.uint32) & np.uint32(0x7FFFFFFF)) > np.uint32(F32_INF)


NAN_PAYLOADS = [
    0x7FC00000, 0xFFC00000,  # canonical quiet NaNs
    0x7F800001, 0xFF800001,  # smallest signalling payload
    0x7FBFFFFF, 0xFFBFFFFF,  # largest signalling payload
    0x7FC00001, 0x7FE00000, 0x7FFFFFFF, 0xFFFFFFFF,  # quiet with payloads, all ones
    0x7FA00000, 0x7F900000, 0x7FD55555, 0xFFEAAAAA,  # payloads that move the torchao bit path
]
