"""BF16: float32 rounded to nearest even at bit 16."""

from __future__ import annotations

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle._validate import as_float32
from mxgate.oracle.bits import ABS32, EXP32, f32_bits


def bf16_bits(x: np.ndarray, profile: str | _profiles.Profile = "gfx950") -> np.ndarray:
    """float32 -> bf16 bit patterns (uint16), round to nearest even.

    NaN follows the profile's ``bf16_nan``: sign | 0x7FC0, 0xFFFF or 0x7FFF.
    """
    p = _profiles.get(profile)
    u = f32_bits(as_float32(x, "x"))
    rounded = (u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
    is_nan = (u & ABS32) > EXP32
    if p.bf16_nan == "all_ones":
        nan = np.uint32(0xFFFF)
    elif p.bf16_nan == "canonical":
        nan = np.uint32(0x7FFF)
    else:
        nan = (u >> np.uint32(16)) & np.uint32(0x8000) | np.uint32(0x7FC0)
    return np.where(is_nan, nan, rounded).astype(np.uint16)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) -> float32 (exact)."""
    if not isinstance(bits, np.ndarray) or bits.dtype != np.uint16:
        raise TypeError("bits must be a numpy array of uint16 bf16 bit patterns")
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def round_bf16(x: np.ndarray, profile: str | _profiles.Profile = "gfx950") -> np.ndarray:
    """float32 values rounded to the nearest bf16 (returned as float32)."""
    return bf16_to_f32(bf16_bits(x, profile))
