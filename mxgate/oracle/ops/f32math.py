"""Correctly rounded float32 operations that NumPy lacks: fused multiply-add and 1/sqrt.

Both are built from IEEE-defined float64 operations (+ - * / sqrt, comparisons, bit ops),
with the double-rounding hazard of float64 -> float32 removed exactly:

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
"""

from __future__ import annotations

import numpy as np

_SPLIT = np.float64(2.0**27 + 1.0)  # Veltkamp splitter for float64
_BELOW_F32 = np.int64((1 << 29) - 1)  # float64 mantissa bits below a float32 ulp
_HALF_F32 = np.int64(1 << 28)  # ... holding exactly half a float32 ulp
_SMALL = np.float64(2.0**-125)  # float32 subnormal range (and a margin): always take the slow way


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s = fl(a + b) and the exact error a + b - s (float64, no overflow)."""
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return s, err


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """fl32(a * b + c) with one rounding, for float32 inputs (broadcast); IEEE special cases."""
    a64 = np.asarray(a, dtype=np.float32).astype(np.float64)
    c64 = np.asarray(c, dtype=np.float32).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        p = a64 * np.asarray(b, dtype=np.float32)  # exact: |p| in [2^-298, 2^256] or 0
        s = np.atleast_1d(p + c64)
        out = s.astype(np.float32)
        # Rounding s to float32 can differ from rounding p + c only if s sits exactly on a
        # float32 midpoint (bits below the float32 ulp = 1000...0) or is below the normal range
        bits = s.view(np.int64)
        suspect = ((bits & _BELOW_F32) == _HALF_F32) | (np.abs(s) < _SMALL)
        if np.any(suspect):
            where = np.flatnonzero(suspect.reshape(-1))
            pb, cb = np.broadcast_arrays(p, c64)
            ps = np.atleast_1d(pb).reshape(-1)[where]
            cs = np.atleast_1d(cb).reshape(-1)[where]
            out.reshape(-1)[where] = _round_odd_sum(ps, cs).astype(np.float32)
    return out.reshape(np.broadcast_shapes(np.shape(p), np.shape(c64)))


def _round_odd_sum(p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """p + c rounded to odd in float64 (exact error by TwoSum; an inexact sum with an even
    last bit moves one ulp toward the true value)."""
    s, err = _two_sum(p, c)
    bits = s.view(np.int64).copy()
    inexact = np.isfinite(s) & (err != 0) & ((bits & 1) == 0)
    toward = np.where(np.signbit(err) == np.signbit(s), 1, -1)  # s != 0 whenever err != 0
    return np.where(inexact, bits + toward, bits).view(np.float64)


def _exceeds_one(m: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact sign of m^2 * x - 1 as (greater, less) masks; m a float32 midpoint, x float32 > 0."""
    m2 = m * m  # exact: m has at most 25 significant bits
    t = m2 * _SPLIT
    hi = t - (t - m2)
    lo = m2 - hi  # hi, lo have at most 26 bits each: hi*x, lo*x exact
    s, err = _two_sum(hi * x, lo * x)
    greater = (s > 1.0) | ((s == 1.0) & (err > 0))
    less = (s < 1.0) | ((s == 1.0) & (err < 0))
    return greater, less


def rsqrt32(x: np.ndarray) -> np.ndarray:
    """The correctly rounded float32 1/sqrt(x): +0 -> +inf, +inf -> 0, x < 0 or NaN -> NaN."""
    x32 = np.asarray(x, dtype=np.float32)
    x64 = x32.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        y = (1.0 / np.sqrt(x64)).astype(np.float32)
    regular = np.isfinite(x64) & (x64 > 0)
    if not np.any(regular):
        return y
    xr = x64[regular]
    yr = y[regular]
    inf32 = np.float32(np.inf)
    below = np.nextafter(yr, np.float32(0)).astype(np.float64)
    above = np.nextafter(yr, inf32).astype(np.float64)
    y64 = yr.astype(np.float64)
    lo_mid = (y64 + below) / 2.0  # exact in float64
    hi_mid = (y64 + above) / 2.0
    # 1/sqrt(x) < lo_mid  <=>  lo_mid^2 * x > 1: the estimate is one ulp too high
    too_high, _ = _exceeds_one(lo_mid, xr)
    # 1/sqrt(x) > hi_mid  <=>  hi_mid^2 * x < 1: one ulp too low
    _, too_low = _exceeds_one(hi_mid, xr)
    fixed = np.where(too_high, below.astype(np.float32), yr)
    fixed = np.where(too_low, above.astype(np.float32), fixed)
    out = y.copy()
    out[regular] = fixed
    return out
