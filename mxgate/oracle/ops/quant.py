"""The two back ends of the indexer op: FP4 (E2M1 + e8m0 per 32, SPEC section 3, the AITER
indexer row) and FP8 (e4m3 + one float32 scale per row of 128, SPEC section 4).

Amax follows the kernel's ``fmaxf`` reductions: a NaN element is ignored (a row of NaN gives
NaN, which the amax floor then replaces). Inf is kept.
"""

from __future__ import annotations

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.bits import ABS32, EXP32, f32_bits, pow2_f32
from mxgate.oracle.formats.e2m1 import encode_e2m1, pack_nibbles
from mxgate.oracle.formats.e4m3 import SATURATE_OF_OVERFLOW, encode_e4m3, max_value
from mxgate.oracle.geometry import GROUP as FP4_GROUP
from mxgate.oracle.mx import quantize_mx
from mxgate.oracle.scales import e8m0_scale, fp8_token_scale, ue8m0_round

Q_AMAX_FLOOR = 1e-10  # fmaxf(q_amax, 1e-10f)
K_AMAX_FLOOR = 1e-4  # fmaxf(k_amax, 1e-4f)
_INV_2_128 = pow2_f32(np.array(-128))  # e8m0 byte 255 as the converter's scale: 2^128


def fmax_amax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """max |x| over ``axis`` ignoring NaN (fmaxf); float32. All-NaN gives NaN."""
    mag = f32_bits(x) & ABS32
    top = np.max(mag, axis=axis)
    nan_rows = top > EXP32
    if np.any(nan_rows):  # rare: drop the NaN elements of those rows only
        cleaned = np.where(mag > EXP32, np.uint32(0), mag)
        fixed = np.max(cleaned, axis=axis)
        all_nan = np.all(mag > EXP32, axis=axis)
        top = np.where(nan_rows, np.where(all_nan, np.uint32(0x7FC00000), fixed), top)
    return np.ascontiguousarray(top, dtype=np.uint32).view(np.float32)


def quantize_fp4(x: np.ndarray, profile: _profiles.Profile) -> tuple[np.ndarray, np.ndarray]:
    """x float32 [..., 128] -> (packed uint8 [..., 64], e8m0 uint8 [..., 4]) under ``profile``.

    quantize_mx decides every finite group. Groups holding NaN or Inf (byte 0xFF there) are
    redone with the kernel's fmaxf amax; a group whose amax is Inf keeps byte 0xFF and the
    converter divides by 2^128 (the scale operand's exponent field taken literally).
    """
    packed, e8m0 = quantize_mx(x, profile, FP4_GROUP)
    flagged = np.flatnonzero(e8m0.reshape(-1) == 0xFF)
    if flagged.size:
        groups = np.ascontiguousarray(x).reshape(-1, FP4_GROUP)[flagged]
        mag = f32_bits(groups) & ABS32
        has_inf = np.any(mag == EXP32, axis=1)
        amax = fmax_amax(groups)
        amax = np.where(np.isnan(amax), np.float32(0), amax)  # all NaN: the floor decides
        scale = e8m0_scale(amax, profile)
        scale[has_inf] = 0xFF
        codes = np.empty(groups.shape, dtype=np.uint8)
        finite = ~has_inf
        codes[finite] = encode_e2m1(groups[finite], profile, scale=scale[finite][:, None])
        codes[has_inf] = encode_e2m1(np.multiply(groups[has_inf], _INV_2_128, dtype=np.float32), profile)
        packed.reshape(-1, FP4_GROUP // 2)[flagged] = pack_nibbles(codes)
        e8m0.reshape(-1)[flagged] = scale
    return packed, e8m0


def fp8_scale(amax: np.ndarray, *, arithmetic: str, floor: float, profile: _profiles.Profile,
              use_ue8m0: bool) -> np.ndarray:
    """Per-row float32 scale: fl(max(amax, floor) * fl(1/fp8_max)) ('reciprocal', Q) or
    fl(max(amax, floor) / fp8_max) ('divide', K); with ue8m0 rounded up to a power of two
    (log2f or bitwise per the profile). An Inf scale stays Inf."""
    floored = np.fmax(amax, np.float32(floor))  # fmaxf: a NaN amax gives the floor
    s = fp8_token_scale(floored, max_value(profile.fp8_variant), arithmetic=arithmetic, amax_floor=floor)
    s = np.array(s, dtype=np.float32, copy=True)
    if use_ue8m0:
        finite = np.isfinite(s)
        s[finite] = ue8m0_round(s[finite], profile.ue8m0_rounding)
    return s


def fp8_encode(x: np.ndarray, scale: np.ndarray, profile: _profiles.Profile) -> np.ndarray:
    """cvt_fp8(fl(x * fl(1/scale))) per row: x float32 [..., 128], scale [...]."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inv = np.float32(1.0) / scale
        y = x * inv[..., None]
    return encode_e4m3(y, profile.fp8_variant, SATURATE_OF_OVERFLOW[profile.fp8_overflow])
