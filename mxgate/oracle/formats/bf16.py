"""BF16: float32 rounded to nearest even at bit 16."""

from __future__ import annotations

from typing import Any

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.arguments import as_float32, is_tensor
from mxgate.oracle.parallel import run_blocks, scratch
from mxgate.oracle.bits import ABS32, EXP32, f32_bits
from mxgate.oracle.rounding import BLOCK
from mxgate.oracle.xp import ABS, EXP, bits, floats, is_numpy, namespace, srl

_U16 = np.uint32(16)
_ONE = np.uint32(1)
_HALF = np.uint32(0x7FFF)
# elements per pass: twice the encoders' chunk. Its seven cheap passes pay more for the Python
# calls per chunk than for leaving L2 (2^24 inputs, 15 interleaved runs twice: 1.53x ml_dtypes
# at 2^18, 1.47x at 2^17, 1.40x at 2^16)
CHUNK = 1 << 18


def bf16_bits(x: Any, profile: str | _profiles.Profile = "gfx950") -> Any:
    """float32 -> bf16 bit patterns (uint16), round to nearest even.

    NaN follows the profile's ``bf16_nan``: sign | 0x7FC0, 0xFFFF or 0x7FFF.
    """
    p = _profiles.get(profile)
    x32 = as_float32(x, "x")
    xp = namespace(x32)
    if not is_numpy(xp):
        return xp.astype(_bits_i32(bits(x32), p), xp.int16).view(xp.uint16)
    u = np.ascontiguousarray(f32_bits(x32)).reshape(-1)
    values = u.view(np.float32)
    out = np.empty(u.shape, dtype=np.uint16)

    def work(first: int, last: int) -> None:
        buffer = scratch("bf16.odd", min(CHUNK, last - first), np.uint32)
        with np.errstate(invalid="ignore"):  # the NaN test below reads signalling NaNs too
            for start in range(first, last, CHUNK):  # cache-sized chunks: the passes stay in cache
                stop = min(start + CHUNK, last)
                part = u[start:stop]
                odd = buffer[: stop - start]
                np.right_shift(part, _U16, out=odd)
                odd &= _ONE
                odd += part
                odd += _HALF  # u + 0x7FFF + (bit 16): rounds half to even at bit 16
                odd >>= _U16
                target = out[start:stop]
                np.copyto(target, odd, casting="unsafe")
                # A NaN anywhere makes the float max NaN (NumPy's max propagates NaN): only then pay
                # for finding the NaNs and applying the profile's NaN rule.
                peak = values[start:stop].max()
                if peak != peak:
                    nan = (part & ABS32) > EXP32
                    target[nan] = _nan_bits(part[nan].view(np.int32), p).astype(np.uint16)

    run_blocks(u.size, work, BLOCK)
    return out.reshape(np.shape(x))


def _bits_i32(u: Any, p: _profiles.Profile) -> Any:
    """The bf16 patterns of int32 float32 patterns u, as int32 values in [0, 65535] (the
    NumPy branch above is the same rule, chunked and threaded)."""
    xp = namespace(u)
    rounded = srl(u + 0x7FFF + (srl(u, 16) & 1), 16)  # int32 wraps as the uint32 sum does
    return xp.where((u & ABS) > EXP, _nan_bits(u, p), rounded)


def _nan_bits(u: Any, p: _profiles.Profile) -> Any:
    """The profile's bf16 NaN for int32 NaN patterns u (int32 values)."""
    xp = namespace(u)
    if p.bf16_nan == "all_ones":
        return xp.full_like(u, 0xFFFF)
    if p.bf16_nan == "canonical":
        return xp.full_like(u, 0x7FFF)
    return (srl(u, 16) & 0x8000) | 0x7FC0


def bf16_to_f32(bits16: Any) -> Any:
    """bf16 bit patterns (uint16) -> float32 (exact)."""
    if is_tensor(bits16):
        if str(bits16.dtype) != "torch.uint16":
            raise TypeError("bits must be a numpy array of uint16 bf16 bit patterns")
        xp = namespace(bits16)
        # through int16: torch's uint16 has few operations
        return floats((xp.astype(bits16.view(xp.int16), xp.int32) & 0xFFFF) << 16)
    if not isinstance(bits16, np.ndarray) or bits16.dtype != np.uint16:
        raise TypeError("bits must be a numpy array of uint16 bf16 bit patterns")
    return (bits16.astype(np.uint32) << np.uint32(16)).view(np.float32)


def round_bf16(x: Any, profile: str | _profiles.Profile = "gfx950") -> Any:
    """float32 values rounded to the nearest bf16 (returned as float32)."""
    return bf16_to_f32(bf16_bits(x, profile))
