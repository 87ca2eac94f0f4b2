"""The two back ends of the indexer op: FP4 (E2M1 + e8m0 per 32, SPEC section 3, the AITER
indexer row) and FP8 (e4m3 + one float32 scale per row of 128, SPEC section 4).

Amax follows the kernel's ``fmaxf`` reductions: a NaN element is ignored (a row of NaN gives
NaN, which the amax floor then replaces). Inf is kept. Written once for NumPy arrays and
tensors (``mxgate.oracle.xp``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.formats.e2m1 import encode_e2m1, pack_nibbles
from mxgate.oracle.formats.e4m3 import SATURATE_OF_OVERFLOW, encode_e4m3, max_value
from mxgate.oracle.geometry import GROUP as FP4_GROUP
from mxgate.oracle.mx import quantize_mx
from mxgate.oracle.ops.f32math import Arith
from mxgate.oracle.scales import e8m0_scale, fp8_token_scale, ue8m0_round
from mxgate.oracle.xp import ABS, DEFAULT_NAN, EXP, bits, device, floats, ieee_quiet, is_numpy, namespace, pow2_f32

Q_AMAX_FLOOR = 1e-10  # fmaxf(q_amax, 1e-10f)
K_AMAX_FLOOR = 1e-4  # fmaxf(k_amax, 1e-4f)
_INV_2_128 = pow2_f32(np.array(-128))  # e8m0 byte 255 as the converter's scale: 2^128


def fmax_amax(x: Any, axis: int = -1) -> Any:
    """max |x| over ``axis`` ignoring NaN (fmaxf); float32. All-NaN gives NaN (0x7FC00000)."""
    xp = namespace(x)
    mag = bits(x) & ABS  # non-negative: the int32 order is the unsigned one
    if not is_numpy(xp):
        nan = mag > EXP
        top = xp.max(xp.where(nan, 0, mag), axis=axis)
        return floats(xp.where(xp.all(nan, axis=axis), DEFAULT_NAN, top))
    top = np.max(mag, axis=axis)
    nan_rows = top > EXP
    if np.any(nan_rows):  # rare: drop the NaN elements of those rows only
        cleaned = np.where(mag > EXP, 0, mag)
        fixed = np.max(cleaned, axis=axis)
        all_nan = np.all(mag > EXP, axis=axis)
        top = np.where(nan_rows, np.where(all_nan, DEFAULT_NAN, fixed), top)
    return np.ascontiguousarray(top, dtype=np.int32).view(np.float32)


def quantize_fp4(x: Any, profile: _profiles.Profile) -> tuple[Any, Any]:
    """x float32 [..., 128] -> (packed uint8 [..., 64], e8m0 uint8 [..., 4]) under ``profile``.

    quantize_mx decides every finite group. Groups holding NaN or Inf (byte 0xFF there) are
    redone with the kernel's fmaxf amax; a group whose amax is Inf keeps byte 0xFF and the
    converter divides by 2^128 (the scale operand's exponent field taken literally).
    """
    xp = namespace(x)
    packed, e8m0 = quantize_mx(x, profile, FP4_GROUP)
    flagged = xp.nonzero(xp.reshape(e8m0, (-1,)) == 0xFF)[0]
    if flagged.shape[0]:
        groups = xp.reshape(x, (-1, FP4_GROUP))[flagged]
        has_inf = xp.any((bits(groups) & ABS) == EXP, axis=1)
        amax = fmax_amax(groups)
        amax = xp.where(xp.isnan(amax), xp.zeros_like(amax), amax)  # all NaN: the floor decides
        scale = e8m0_scale(amax, profile)
        scale[has_inf] = 0xFF
        finite = ~has_inf
        codes = xp.empty(groups.shape, dtype=xp.uint8, device=device(x))
        codes[finite] = encode_e2m1(groups[finite], profile, scale=scale[finite][:, None])
        inf_groups = groups[has_inf]
        with ieee_quiet(xp):
            divided = Arith(xp).mul(inf_groups, xp.asarray(_INV_2_128, device=device(x)))
        codes[has_inf] = encode_e2m1(divided, profile)
        xp.reshape(packed, (-1, FP4_GROUP // 2))[flagged] = pack_nibbles(codes)
        xp.reshape(e8m0, (-1,))[flagged] = scale
    return packed, e8m0


def fp8_scale(amax: Any, *, arithmetic: str, floor: float, profile: _profiles.Profile,
              use_ue8m0: bool) -> Any:
    """Per-row float32 scale: fl(max(amax, floor) * fl(1/fp8_max)) ('reciprocal', Q) or
    fl(max(amax, floor) / fp8_max) ('divide', K); with ue8m0 rounded up to a power of two
    (log2f or bitwise per the profile). An Inf scale stays Inf."""
    xp = namespace(amax)
    floor32 = xp.asarray(floor, dtype=xp.float32, device=device(amax))
    floored = xp.where(xp.isnan(amax), floor32, xp.maximum(amax, floor32))  # fmaxf: a NaN amax gives the floor
    s = fp8_token_scale(floored, max_value(profile.fp8_variant), arithmetic=arithmetic, amax_floor=floor)
    s = xp.asarray(s, dtype=xp.float32, copy=True)
    if use_ue8m0:
        finite = xp.isfinite(s)
        s[finite] = ue8m0_round(s[finite], profile.ue8m0_rounding)
    return s


def fp8_encode(x: Any, scale: Any, profile: _profiles.Profile) -> Any:
    """cvt_fp8(fl(x * fl(1/scale))) per row: x float32 [..., 128], scale [...]."""
    xp = namespace(x, scale)
    ar = Arith(xp)
    with ieee_quiet(xp):
        inv = ar.div(xp.ones_like(scale), scale)
        y = ar.mul(x, inv[..., None])
    return encode_e4m3(y, profile.fp8_variant, SATURATE_OF_OVERFLOW[profile.fp8_overflow])
