"""Block and token scales: e8m0 policies (SPEC section 3) and the FP8 per-token scale (section 4).

Only bit operations and correctly rounded float32 arithmetic decide a scale. Where a kernel
rounds through ``log2f``, the oracle uses a precomputed threshold table (``log2f_threshold_table``)
derived with 60-digit decimal arithmetic, never a platform log2.
"""

from __future__ import annotations

from decimal import Decimal, localcontext
from functools import cache
from typing import Any

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.arguments import as_float32, choice, real
from mxgate.oracle.block_element import E2M1, BlockElement
from mxgate.oracle.bits import ABS32
from mxgate.oracle.xp import (ABS, EXP, MANT, bits, device, i32, is_numpy, namespace, pow2_f32, srl, table_on,
                              take, x86_nan)

_MIN_K = -149  # log2 of the smallest float32 subnormal
_MAX_K = 127


def _half_gap(k: int) -> Decimal:
    """Distance from the integer k up to the float32 rounding boundary in the direction of k+1.

    fl(log2 s) == k for s = 2^k (1 + f) exactly when log2(1 + f) is below this distance.
    """
    if k == 0:
        return Decimal(0)  # any positive log2 is representable on its own: never rounds to 0
    a = abs(k)
    e = a.bit_length() - 1  # a in [2^e, 2^(e+1))
    if k > 0 or a != 1 << e:
        return Decimal(2) ** (e - 24)  # half an ulp of the binade [2^e, 2^(e+1))
    return Decimal(2) ** (e - 25)  # just below a power of two the spacing halves


@cache
def log2f_threshold_table() -> np.ndarray:
    """J(k) for k = -149..127: the largest 23-bit mantissa M with fl32(log2(2^k (1 + M 2^-23))) == k.

    ceil(log2f(s)) is k when s's mantissa is <= J(k), else k + 1 (for a correctly rounded log2f).
    Index the result with k + 149.
    """
    table = np.zeros(_MAX_K - _MIN_K + 1, dtype=np.int64)
    with localcontext() as context:  # 60 digits here only; the caller's decimal context stays
        context.prec = 60
        for k in range(_MIN_K, _MAX_K + 1):
            h = _half_gap(k)
            if h == 0:
                continue
            bound = ((Decimal(2) ** h) - 1) * (1 << 23)  # M < bound, and bound is irrational
            table[k - _MIN_K] = max(int(bound.to_integral_value(rounding="ROUND_CEILING")) - 1, 0)
    table.setflags(write=False)
    return table


def _round_up_gap(k: int) -> Decimal:
    """Half the float32 spacing just below the integer t = k + 1, toward k: fl(log2 a) == t for
    a = 2^k (1 + f) exactly when log2(1 + f) >= 1 - this (no ties: the boundary is irrational)."""
    t = k + 1
    a = abs(t)
    e = a.bit_length() - 1
    if t > 0 and a == 1 << e:
        return Decimal(2) ** (e - 25)  # below a power of two the spacing halves
    return Decimal(2) ** (e - 24)


@cache
def log2f_floor_table() -> np.ndarray:
    """K(k) for k = -149..127: the smallest 23-bit mantissa M with fl32(log2(2^k (1 + M 2^-23))) == k + 1
    (2^23 when there is none), so floor(log2f(a)) is k + (M >= K(k)) for a correctly rounded log2f.
    Index the result with k + 149."""
    table = np.full(_MAX_K - _MIN_K + 1, 1 << 23, dtype=np.int64)
    with localcontext() as context:
        context.prec = 60
        for k in range(_MIN_K, _MAX_K + 1):
            if k + 1 == 0:
                continue  # a log2 just below 0 is representable: it never rounds up to 0
            bound = ((Decimal(2) ** (1 - _round_up_gap(k))) - 1) * (1 << 23)  # M >= bound
            table[k - _MIN_K] = min(int(bound.to_integral_value(rounding="ROUND_CEILING")), 1 << 23)
    table.setflags(write=False)
    return table


# The functions below take any namespace's arrays (NumPy, or torch tensors on any device):
# bit patterns are int32 (uint32 from NumPy callers works alike), exponents int64.


def _floor_log2f_bits(u: Any) -> Any:
    """floor(log2f(a)) for positive finite float32 bits u, log2f correctly rounded (SPEC 3.2)."""
    xp = namespace(u)
    k, mant = _exponent_and_mantissa(u)
    limit = take(table_on(log2f_floor_table(), u), xp.clip(k, _MIN_K, _MAX_K) - _MIN_K)
    return k + xp.astype(mant >= limit, xp.int64)


def _exponent_and_mantissa(u: Any) -> tuple[Any, Any]:
    """(k, M) with s = 2^k (1 + M 2^-23) for positive finite float32 bits u (subnormals normalised)."""
    xp = namespace(u)
    field = xp.astype(srl(u, 23) & 0xFF, xp.int64)
    mant = xp.astype(u & MANT, xp.int64)
    # Subnormal: leading bit position p from the exact float32 conversion of the integer mantissa.
    lead = xp.astype(srl(bits(xp.astype(mant, xp.float32)), 23), xp.int64) - 127
    lead = xp.clip(lead, min=0)
    sub_mant = (mant - (xp.ones_like(lead) << lead)) << (23 - lead)
    normal = field > 0
    k = xp.where(normal, field - 127, lead - 149)
    return k, xp.where(normal, mant, sub_mant)


def ceil_log2f(s: Any) -> Any:
    """ceil(log2f(s)) as int32 for positive finite float32 s, log2f correctly rounded."""
    s32 = as_float32(s, "s")
    xp = namespace(s32)
    u = bits(s32)
    if bool(xp.any(((u & ABS) == 0) | (u < 0) | ((u & ABS) >= EXP))):
        raise ValueError("s must be positive and finite for ceil_log2f")
    return xp.astype(_ceil_log2f_bits(u), xp.int32)


def _ceil_log2f_bits(u: Any) -> Any:
    xp = namespace(u)
    k, mant = _exponent_and_mantissa(u)
    limit = take(table_on(log2f_threshold_table(), u), xp.clip(k, _MIN_K, _MAX_K) - _MIN_K)
    return k + xp.astype(mant > limit, xp.int64)


def _ceil_pow2_biased(u: Any) -> Any:
    """Biased exponent of ceil_pow2(v) from v's bits: bump the field when any mantissa bit is set."""
    xp = namespace(u)
    field = xp.astype(srl(u, 23) & 0xFF, xp.int64)
    bump = ((u & MANT) != 0) & (field != 0xFF)
    return field + xp.astype(bump, xp.int64)


def _floor_log2_biased(u: Any) -> Any:
    k, _ = _exponent_and_mantissa(u)
    return k + 127


def _const(xp: Any, value: float, like: Any) -> Any:
    """A float32 constant for arithmetic with ``like``: a NumPy scalar, else a 0-d tensor on
    like's device (torch on CUDA turns a division by a host scalar into a reciprocal multiply)."""
    value = np.float32(value)
    return value if is_numpy(xp) else xp.asarray(float(value), dtype=xp.float32, device=device(like))


def _fmax(xp: Any, a: Any, floor: Any) -> Any:
    """np.maximum(a, floor) for a non-NaN floor: a NaN ``a`` stays that NaN (bits and all), and
    of two equal values (+0, -0) the floor is kept, as NumPy keeps its second operand."""
    if is_numpy(xp):
        return np.maximum(a, floor)
    return xp.where(xp.isnan(a) | (a > floor), a, floor)


def _f32_op(xp: Any, result: Any, *operands: Any) -> Any:
    """A float32 array result with x86's NaNs (NumPy's are already; a GPU's canonical NaN is not)."""
    return np.asarray(result, dtype=np.float32) if is_numpy(xp) else x86_nan(result, *operands)


def e8m0_scale(amax: Any, profile: str | _profiles.Profile = "gfx950", *, element: BlockElement = E2M1) -> Any:
    """e8m0 byte per block from its amax (float32 >= 0; NaN and Inf give 0xFF) under the profile,
    for blocks of ``element`` (E2M1 by default; E4M3FN for MXFP8: 448 and 2^8 where E2M1 has 6 and 2^2)."""
    p = _profiles.get(profile)
    a = as_float32(amax, "amax")
    xp = namespace(a)
    if bool(xp.any(a < 0)):
        raise ValueError("amax must be >= 0 (the largest magnitude of a block)")
    if is_numpy(xp):
        a = np.asarray(a, dtype=np.float32)
    if p.amax_floor is not None and p.floor_where == "before":
        a = _fmax(xp, a, _const(xp, p.amax_floor, a))
    special = ~xp.isfinite(a)
    if p.scale_policy in ("rceil", "rceil_log2f", "rceil_exact"):
        with np.errstate(invalid="ignore"):  # a signalling NaN amax raises the flag; NaN is settled as special
            if p.scale_arithmetic == "reciprocal":
                v = a * _const(xp, np.float32(1.0) / np.float32(element.max_value), a)
            else:
                v = a / _const(xp, element.max_value, a)
        if is_numpy(xp):
            v = np.asarray(v, dtype=np.float32)
        if p.amax_floor is not None and p.floor_where == "after":
            v = _fmax(xp, v, _const(xp, p.amax_floor, a))
        u = bits(v)
        if p.scale_policy == "rceil":
            biased = _ceil_pow2_biased(u)
        elif p.scale_policy == "rceil_exact":
            # ceil(log2 v) exactly: a subnormal v at or below 2^-127 (bits 0x00400000) rounds up to
            # the e8m0 value 2^-127, byte 0; above it, to 2^-126 (the bitwise ceil's byte 1)
            biased = xp.where((u & ABS) <= 0x00400000, 0, _ceil_pow2_biased(u))
        else:
            positive = (u & ABS) != 0
            safe = xp.where(positive & ~special, u, 0x3F800000)
            biased = xp.where(positive, _ceil_log2f_bits(safe) + 127, 0)
    else:
        u = bits(a)
        nonzero = (u & ABS) != 0
        if p.scale_policy == "floor":
            safe = xp.where(nonzero, u, 0x3F800000)
            biased = xp.where(nonzero, _floor_log2_biased(safe), 0) - element.emax
        elif p.scale_policy == "floor_log2f":
            safe = xp.where(nonzero & ~special, u, 0x3F800000)
            biased = xp.where(nonzero, _floor_log2f_bits(safe) + 127, 0) - element.emax
        elif p.scale_policy == "ceil":
            biased = _ceil_pow2_biased(u) - element.emax
        else:  # even: round amax's mantissa to the element's mantissa bits, then floor
            rounded = (u + element.even_round_bit) & i32(0xFF800000)  # int32 wraps as the uint32 sum does
            field = xp.astype(srl(rounded, 23) & 0xFF, xp.int64)
            biased = xp.where(field == 0xFF, 0xFF, field - element.emax)  # rounding up into Inf: no scale fits
    # A NaN or Inf amax is the exponent field 0xFF under every policy (SPEC 3.4): the byte 0xFF,
    # which only a "clamped" profile's exp_clamp then moves (as the exact model has it).
    biased = xp.clip(xp.where(special, 0xFF, biased), 0, 0xFF)
    if p.exp_clamp is not None:
        biased = xp.clip(biased, *p.exp_clamp)
    if p.special_scale == "nan_byte":
        biased = xp.where(special, 0xFF, biased)
    elif p.special_scale in ("satfinite", "inf_field"):
        biased = xp.where(xp.isnan(a), 0xFF, xp.where(xp.isinf(a), _inf_byte(p, element), biased))
    return xp.astype(xp.asarray(biased), xp.uint8)


def _inf_byte(p: _profiles.Profile, element: BlockElement = E2M1) -> int:
    """The byte of an Inf amax under special_scale satfinite or inf_field (SPEC 3.4)."""
    if p.special_scale == "satfinite":
        return 0xFE  # the largest finite e8m0
    return 0xFF - element.emax if p.scale_policy in ("floor", "floor_log2f", "ceil") else 0xFF


_HALF = 1 << 16  # patterns per table range: one per value of the top 16 bits
_RANGES = 1 << 15  # sign-clear patterns have top 16 bits below 0x8000


class _ScaleTable:
    """e8m0_scale over each range of 2^16 sign-clear amax patterns sharing their top 16 bits.

    e8m0_scale is a non-decreasing function of a non-negative amax under every policy (each
    step is: max with a floor, a positive multiply or division rounded to nearest, a ceil or
    floor of a binade, a clip); a NaN or Inf range is constant. A range whose first and last
    patterns differ by one byte therefore changes once, at ``threshold`` (found by bisection on
    e8m0_scale itself); a range they span by more is ``irregular`` and goes to e8m0_scale.
    """

    def __init__(self, p: _profiles.Profile) -> None:
        top = np.arange(_RANGES, dtype=np.uint32) << np.uint32(16)
        # every range is evaluated, NaN and subnormal ones too: their float flags are expected
        with np.errstate(all="ignore"):
            first = e8m0_scale(top.view(np.float32), p).astype(np.int64)
            last = e8m0_scale((top | np.uint32(_HALF - 1)).view(np.float32), p).astype(np.int64)
        steps = np.flatnonzero(last - first == 1)
        below = np.zeros(steps.size, np.int64)  # f(below) is first's byte
        above = np.full(steps.size, _HALF - 1, np.int64)  # f(above) is last's byte
        while steps.size and (above - below).max() > 1:
            middle = (below + above) // 2
            with np.errstate(all="ignore"):
                moved = e8m0_scale((top[steps] | middle.astype(np.uint32)).view(np.float32), p) > first[steps]
            above = np.where(moved, middle, above)
            below = np.where(moved, below, middle)
        threshold = np.full(_RANGES, _HALF, np.uint32)  # low 16 bits never reach it: constant
        threshold[steps] = above.astype(np.uint32)
        self.first = first.astype(np.uint8)
        self.threshold = threshold
        self.irregular = (last - first < 0) | (last - first > 1)
        self.any_irregular = bool(self.irregular.any())
        for table in (self.first, self.threshold, self.irregular):
            table.setflags(write=False)


# By the fields the table's construction read, so that profiles differing only in element or
# FP8 fields share one table (and a recording profile records only those fields).
_scale_table = _profiles.MemoByReads(_ScaleTable)


def e8m0_scale_of_bits(bits: np.ndarray, profile: str | _profiles.Profile = "gfx950", *,
                       out: np.ndarray | None = None, scratch: np.ndarray | None = None) -> np.ndarray:
    """e8m0_scale of float32 amax bit patterns with the sign bit clear (uint32, 1-d), by table:
    the same bytes, in a few passes (two lookups by the top 16 bits, one compare).

    out: uint8 result buffer; scratch: an intp buffer of the same size (both optional).
    """
    p = _profiles.get(profile)
    table = _scale_table(p)
    u = np.asarray(bits)
    if u.dtype != np.uint32 or u.ndim != 1:
        raise TypeError("bits must be a 1-d uint32 array of amax bit patterns")
    if u.size and u.max() > ABS32:
        raise ValueError("bits must have the sign bit clear (an amax is >= 0)")
    top = np.empty(u.size, np.intp) if scratch is None else scratch
    result = np.empty(u.size, np.uint8) if out is None else out
    np.right_shift(u, np.uint32(16), out=top, casting="unsafe")
    np.take(table.first, top, out=result, mode="wrap")
    limit = np.take(table.threshold, top, mode="wrap")
    low = u & np.uint32(_HALF - 1)
    result += low >= limit
    if table.any_irregular:
        irregular = np.take(table.irregular, top, mode="wrap")
        if irregular.any():
            result[irregular] = e8m0_scale(u[irregular].view(np.float32), p)
    return result


def ue8m0_round(s: Any, rounding: str = "log2f") -> Any:
    """Power-of-two scale at or above s: exp2f(ceilf(log2f(s))) ('log2f') or bitwise ceil_pow2.

    s must be positive; +Inf stays +Inf (exp2f(ceilf(log2f(inf))) is inf).
    """
    rounding = choice(rounding, "rounding", ("log2f", "bitwise"))
    s32 = as_float32(s, "s")
    xp = namespace(s32)
    u = bits(s32)
    if bool(xp.any((u < 0) | ((u & ABS) == 0) | ((u & ABS) > EXP))):
        raise ValueError("s must be positive (or +Inf), not zero, negative or NaN")
    infinite = u == EXP
    u = xp.where(infinite, 0x3F800000, u)
    if rounding == "log2f":
        k = _ceil_log2f_bits(u)
    else:
        k = _ceil_pow2_biased(u) - 127
    return xp.where((k > 127) | infinite, float("inf"), pow2_f32(xp.clip(k, -149, 127)))


def fp8_token_scale(
    amax: Any,
    fp8_max: float,
    *,
    arithmetic: str,
    amax_floor: float,
    scale_fmt: str | None = None,
    rounding: str = "log2f",
) -> Any:
    """FP8 per-token scale: max(amax, floor) * fl(1/fp8_max) ('reciprocal', Q path) or
    / fp8_max ('divide', K path); with scale_fmt 'ue8m0' rounded up to a power of two.

    fp8_max and amax_floor are rounded to float32 (as the kernels' float constants are);
    fp8_max must be finite and > 0, amax_floor finite and >= 0."""
    arithmetic = choice(arithmetic, "arithmetic", ("reciprocal", "divide"))
    scale_fmt = choice(scale_fmt, "scale_fmt", (None, "ue8m0"))
    fp8_max32 = real(fp8_max, "fp8_max", positive=True)
    floor32 = real(amax_floor, "amax_floor", minimum=0.0)
    a = as_float32(amax, "amax")
    xp = namespace(a)
    a = _fmax(xp, a, _const(xp, floor32, a))
    if arithmetic == "reciprocal":
        factor = _const(xp, np.float32(1.0) / fp8_max32, a)
        s = _f32_op(xp, a * factor, a, factor)
    else:
        divisor = _const(xp, fp8_max32, a)
        s = _f32_op(xp, a / divisor, a, divisor)
    if scale_fmt == "ue8m0":
        s = ue8m0_round(s, rounding)
    return s
