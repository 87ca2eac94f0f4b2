"""BF16: float32 rounded to nearest even at bit 16."""

from __future__ import annotations

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.arguments import as_float32
from mxgate.oracle.parallel import run_blocks, scratch
from mxgate.oracle.bits import ABS32, EXP32, f32_bits
from mxgate.oracle.rounding import BLOCK, CHUNK

_U16 = np.uint32(16)


def bf16_bits(x: np.ndarray, profile: str | _profiles.Profile = "gfx950") -> np.ndarray:
    """float32 -> bf16 bit patterns (uint16), round to nearest even.

    NaN follows the profile's ``bf16_nan``: sign | 0x7FC0, 0xFFFF or 0x7FFF.
    """
    p = _profiles.get(profile)
    u = np.ascontiguousarray(f32_bits(as_float32(x, "x"))).reshape(-1)
    out = np.empty(u.shape, dtype=np.uint16)

    def work(first: int, last: int) -> None:
        buffer = scratch("bf16.odd", min(CHUNK, last - first), np.uint32)
        with np.errstate(invalid="ignore"):  # the NaN test below reads signalling NaNs too
            _round(first, last, buffer)

    def _round(first: int, last: int, buffer: np.ndarray) -> None:
        for start in range(first, last, CHUNK):  # cache-sized chunks: the passes stay in cache
            part = u[start : min(start + CHUNK, last)]
            odd = buffer[: part.size]
            np.right_shift(part, _U16, out=odd)
            odd &= np.uint32(1)
            odd += part
            odd += np.uint32(0x7FFF)  # u + 0x7FFF + (bit 16): rounds half to even at bit 16
            odd >>= _U16
            target = out[start : start + part.size]
            np.copyto(target, odd, casting="unsafe")
            # A NaN anywhere makes the float max NaN (NumPy's max propagates NaN): only then pay
            # for finding the NaNs and applying the profile's NaN rule.
            if np.isnan(np.max(part.view(np.float32))):
                nan = (part & ABS32) > EXP32
                target[nan] = _nan_bits(part[nan], p)

    run_blocks(u.size, work, BLOCK)
    return out.reshape(np.shape(x))


def _nan_bits(u: np.ndarray, p: _profiles.Profile) -> np.ndarray:
    if p.bf16_nan == "all_ones":
        return np.full(u.shape, 0xFFFF, np.uint16)
    if p.bf16_nan == "canonical":
        return np.full(u.shape, 0x7FFF, np.uint16)
    return ((u >> np.uint32(16)) & np.uint32(0x8000) | np.uint32(0x7FC0)).astype(np.uint16)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) -> float32 (exact)."""
    if not isinstance(bits, np.ndarray) or bits.dtype != np.uint16:
        raise TypeError("bits must be a numpy array of uint16 bf16 bit patterns")
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def round_bf16(x: np.ndarray, profile: str | _profiles.Profile = "gfx950") -> np.ndarray:
    """float32 values rounded to the nearest bf16 (returned as float32)."""
    return bf16_to_f32(bf16_bits(x, profile))
