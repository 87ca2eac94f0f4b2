"""Correctly rounded float32 operations that NumPy lacks: fused multiply-add and 1/sqrt; the
float16 rounding; and + - * / with the NaN bits of x86 NumPy in any namespace.

fma32 and rsqrt32 are built from IEEE-defined float64 operations (+ - * / sqrt, comparisons,
bit ops), with the double-rounding hazard of float64 -> float32 removed exactly:

* ``fma32(a, b, c)``: a*b is exact in float64 (24 + 24 bits < 53). s = fl64(a*b + c) rounded
  to float32 is already right unless s lands exactly on a float32 midpoint (rounding is
  monotone, so s and the exact sum lie on the same side of every other midpoint) or in the
  float32 subnormal range. Those sums are redone rounded to odd in float64 (TwoSum gives the
  exact error; an inexact sum with an even last bit moves one ulp toward it), then rounded
  once to float32: rounding to odd at 53 bits then to nearest even at 24 bits equals one
  nearest-even rounding (53 >= 24 + 2).
* ``rsqrt32(x)``: the float32 nearest to 1/sqrt(x). A float64 estimate is rounded to float32
  and then checked against the two neighbouring float32 midpoints m with the exact sign of
  m^2 * x - 1 (m^2 is exact in float64; its Veltkamp halves times x are exact; TwoSum decides
  the comparison with 1). 1/sqrt(x) is never a float32 midpoint (it is either a power of two
  or not dyadic), so there are no ties.

Finite results of + - * / are IEEE on every device (one rounding, subnormals kept). NaN
results are not: CUDA returns one canonical NaN where x86 keeps the first NaN operand
(quieted) or makes the "indefinite" 0xFFC00000. ``Arith`` is NumPy's own arithmetic on NumPy
arrays and rewrites NaN results by bits elsewhere (``xp.x86_nan``); float16 conversions off
NumPy are NumPy's integer algorithms (torch's casts canonicalise NaN payloads).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from mxgate.oracle.xp import SIGN, bits, bits64, floats, floats64, ieee_quiet, is_numpy, namespace, srl, x86_nan

_SPLIT = np.float64(2.0**27 + 1.0)  # Veltkamp splitter for float64
_BELOW_F32 = np.int64((1 << 29) - 1)  # float64 mantissa bits below a float32 ulp
_HALF_F32 = np.int64(1 << 28)  # ... holding exactly half a float32 ulp
_SMALL = np.float64(2.0**-125)  # float32 subnormal range (and a margin): always take the slow way


class Arith:
    """+ - * /, fma32 and negation on float32 arrays of ``xp``, with x86 NumPy's NaN bits.

    On NumPy the hardware's own results are those bits. Elsewhere ``track_nan`` rewrites every
    NaN result; ``nan_exact`` runs a computation without it first and again with it only when
    a NaN reaches the result (a NaN whose bits never reach an output cannot change a byte).
    """

    def __init__(self, xp: ModuleType, track_nan: bool = True) -> None:
        self.xp = xp
        self.fix = track_nan and not is_numpy(xp)

    def _nan(self, result: Any, *operands: Any) -> Any:
        return x86_nan(result, *operands) if self.fix else result

    def add(self, a: Any, b: Any) -> Any:
        return self._nan(a + b, a, b)

    def sub(self, a: Any, b: Any) -> Any:
        return self._nan(a - b, a, b)

    def mul(self, a: Any, b: Any) -> Any:
        return self._nan(a * b, a, b)

    def div(self, a: Any, b: Any) -> Any:
        return self._nan(a / b, a, b)

    def fma(self, a: Any, b: Any, c: Any) -> Any:
        out = fma32(a, b, c)
        if not self.fix:
            return out
        return x86_nan(out, x86_nan(a * b, a, b), c)  # NumPy's: a*b (first NaN of a, b), then + c

    def neg(self, x: Any) -> Any:
        """-x: x86 flips the sign bit, NaN included."""
        return -x if is_numpy(self.xp) else floats(bits(x) ^ SIGN)


def nan_exact(xp: ModuleType, compute: Callable[[Arith], Any]) -> Any:
    """``compute(arith)`` with every NaN result's bits as x86 NumPy leaves them."""
    out = compute(Arith(xp, track_nan=False))
    if is_numpy(xp) or not bool(xp.any(xp.isnan(out))):
        return out
    return compute(Arith(xp, track_nan=True))


def _two_sum(a: Any, b: Any) -> tuple[Any, Any]:
    """s = fl(a + b) and the exact error a + b - s (float64, no overflow)."""
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return s, err


def fma32(a: Any, b: Any, c: Any) -> Any:
    """fl32(a * b + c) with one rounding, for float32 inputs (broadcast); IEEE special cases.
    NaN bits are NumPy's on NumPy (``Arith.fma`` gives them elsewhere)."""
    xp = namespace(a, b, c)
    if not is_numpy(xp):
        return _fma32_generic(xp, a, b, c)
    a64 = np.asarray(a, dtype=np.float32).astype(np.float64)
    c64 = np.asarray(c, dtype=np.float32).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        p = a64 * np.asarray(b, dtype=np.float32)  # exact: |p| in [2^-298, 2^256] or 0
        s = np.atleast_1d(p + c64)
        out = s.astype(np.float32)
        # Rounding s to float32 can differ from rounding p + c only if s sits exactly on a
        # float32 midpoint (bits below the float32 ulp = 1000...0) or is below the normal range
        u = s.view(np.int64)
        suspect = ((u & _BELOW_F32) == _HALF_F32) | (np.abs(s) < _SMALL)
        if np.any(suspect):  # the hot path redoes only those (rare) sums
            where = np.flatnonzero(suspect.reshape(-1))
            pb, cb = np.broadcast_arrays(p, c64)
            ps = np.atleast_1d(pb).reshape(-1)[where]
            cs = np.atleast_1d(cb).reshape(-1)[where]
            out.reshape(-1)[where] = _round_odd_sum(ps, cs).astype(np.float32)
    return out.reshape(np.broadcast_shapes(np.shape(p), np.shape(c64)))


def _fma32_generic(xp: ModuleType, a: Any, b: Any, c: Any) -> Any:
    """fma32 without data-dependent shapes: every sum also rounded to odd, picked where needed."""
    p = xp.astype(a, xp.float64) * xp.astype(b, xp.float64)  # exact
    c64 = xp.astype(c, xp.float64)
    s = p + c64
    suspect = ((bits64(s) & int(_BELOW_F32)) == int(_HALF_F32)) | (xp.abs(s) < float(_SMALL))
    p, c64 = xp.broadcast_to(p, s.shape), xp.broadcast_to(c64, s.shape)
    return xp.astype(xp.where(suspect, _round_odd_sum(p, c64), s), xp.float32)


def _round_odd_sum(p: Any, c: Any) -> Any:
    """p + c rounded to odd in float64 (exact error by TwoSum; an inexact sum with an even
    last bit moves one ulp toward the true value)."""
    xp = namespace(p, c)
    s, err = _two_sum(p, c)
    u = bits64(s)
    inexact = xp.isfinite(s) & (err != 0) & ((u & 1) == 0)
    away = xp.signbit(err) != xp.signbit(s)  # s != 0 whenever err != 0
    return floats64(xp.where(inexact, u + 1 - 2 * xp.astype(away, xp.int64), u))


def _exceeds_one(m: Any, x: Any) -> tuple[Any, Any]:
    """Exact sign of m^2 * x - 1 as (greater, less) masks; m a float32 midpoint, x float32 > 0."""
    m2 = m * m  # exact: m has at most 25 significant bits
    t = m2 * float(_SPLIT)
    hi = t - (t - m2)
    lo = m2 - hi  # hi, lo have at most 26 bits each: hi*x, lo*x exact
    s, err = _two_sum(hi * x, lo * x)
    greater = (s > 1.0) | ((s == 1.0) & (err > 0))
    less = (s < 1.0) | ((s == 1.0) & (err < 0))
    return greater, less


def rsqrt32(x: Any) -> Any:
    """The correctly rounded float32 1/sqrt(x): +0 -> +inf, +inf -> 0, x < 0 or NaN -> NaN
    (x86's: a NaN input quieted, else the indefinite NaN)."""
    xp = namespace(x)
    x32 = xp.asarray(x, dtype=xp.float32)
    x64 = xp.astype(x32, xp.float64)
    with ieee_quiet(xp):
        y = x86_nan(xp.astype(1.0 / xp.sqrt(x64), xp.float32), x32)
    regular = xp.isfinite(x64) & (x64 > 0)
    # the irregular elements take 1.0 through the check and keep y
    xr = xp.where(regular, x64, 1.0)
    yr = xp.where(regular, y, 1.0)
    below = xp.nextafter(yr, xp.zeros_like(yr))
    above = xp.nextafter(yr, xp.full_like(yr, float("inf")))
    y64 = xp.astype(yr, xp.float64)
    # 1/sqrt(x) < lo_mid  <=>  lo_mid^2 * x > 1: the estimate is one ulp too high
    too_high, _ = _exceeds_one((y64 + xp.astype(below, xp.float64)) / 2.0, xr)  # midpoints: exact
    # 1/sqrt(x) > hi_mid  <=>  hi_mid^2 * x < 1: one ulp too low
    _, too_low = _exceeds_one((y64 + xp.astype(above, xp.float64)) / 2.0, xr)
    fixed = xp.where(too_high, below, xp.where(too_low, above, yr))
    return xp.where(regular, fixed, y)


def nextafter(x: Any, toward: float) -> Any:
    """One float32 step from x toward ``toward`` (C nextafter: a NaN comes back as it is)."""
    xp = namespace(x)
    return xp.where(xp.isnan(x), x, xp.nextafter(x, xp.full_like(x, toward)))


# ---- float16 ------------------------------------------------------------------------------------


def round_f16(x: Any) -> Any:
    """float32 -> the nearest float16 value (nearest even) as float32: NumPy's round trip,
    NaN payload's top bits kept."""
    xp = namespace(x)
    if is_numpy(xp):
        with np.errstate(over="ignore"):
            return x.astype(np.float16).astype(np.float32)
    return f16_bits_to_f32(f32_to_f16_bits(x))


def f32_to_f16_bits(x: Any) -> Any:
    """float32 -> float16 bit patterns (int32 in [0, 65535]) as NumPy's astype(float16)
    (npy_floatbits_to_halfbits): round to nearest even, a NaN payload's top bits kept (a NaN
    that would read as Inf gets +1)."""
    xp = namespace(x)
    f = bits(x)
    f_exp = f & 0x7F800000
    sign = srl(f, 16) & 0x8000
    sig = f & 0x007FFFFF
    # NaN / Inf / overflow
    nan_bits = 0x7C00 + srl(sig, 13)
    nan_bits = xp.where(nan_bits == 0x7C00, nan_bits + 1, nan_bits)
    big = xp.where((f_exp == 0x7F800000) & (sig != 0), nan_bits, xp.full_like(f, 0x7C00))
    # subnormal results (f_exp <= 0x38000000): shift the 24-bit significand right, RNE
    e = srl(f_exp, 23)
    full = sig + 0x00800000
    shift = xp.clip(126 - e, 0, 31)  # only where 0x33000000 <= f_exp <= 0x38000000: 14..24
    q = full >> shift
    rem = full & ((xp.ones_like(full) << shift) - 1)
    half = xp.where(shift > 0, xp.ones_like(full) << xp.clip(shift - 1, 0, 31), xp.zeros_like(full))
    up = (rem > half) | ((rem == half) & ((q & 1) == 1))
    sub = q + xp.astype(up, xp.int32)
    sub = xp.where(f_exp < 0x33000000, xp.zeros_like(f), sub)
    # normal results: rebias, round the 13 dropped bits to nearest even
    normal = ((f_exp - 0x38000000) >> 13) + srl(sig, 13)
    dropped = sig & 0x1FFF
    up_n = (dropped > 0x1000) | ((dropped == 0x1000) & ((normal & 1) == 1))
    normal = normal + xp.astype(up_n, xp.int32)  # a carry into the exponent is right (up to Inf)
    out = xp.where(f_exp <= 0x38000000, sub, normal)
    out = xp.where(f_exp >= 0x47800000, big, out)
    return sign | out


def f16_bits_to_f32(h: Any) -> Any:
    """float16 bit patterns (int32 in [0, 65535]) -> float32, exact, NaN payload kept."""
    xp = namespace(h)
    sign = (h & 0x8000) << 16
    h_exp = h & 0x7C00
    h_sig = h & 0x03FF
    inf_nan = sign | 0x7F800000 | (h_sig << 13)
    normal = sign | (((h & 0x7FFF) + 0x1C000) << 13)
    sub = bits(xp.astype(h_sig, xp.float32) * 2.0**-24) | sign  # h_sig * 2^-24: exact
    out = xp.where(h_exp == 0, sub, normal)
    return floats(xp.where(h_exp == 0x7C00, inf_nan, out))
