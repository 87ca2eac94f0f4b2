"""Exact arithmetic for the scorer oracles: exact weighted head sums rounded once to float64,
correctly rounded float32 additions of exact float64 values, and exact rationals -> float32.

Everything here uses integer operations, float64 + - * on operands where the result is exact
(or rounded to odd, then once), and comparisons. No platform transcendental is involved.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

LIMB_BITS = 4  # digit width of the limb accumulator (see exact_weighted_sum)
_BATCH = 64  # terms added between carry passes: 64 * 2**56 = 2**62 < 2**63
_STOP = 1 << (62 - LIMB_BITS)  # |M| >= 2^58: 59+ significant bits, enough to round to odd


def pow2_f64(e: np.ndarray | int) -> np.ndarray:
    """2**e as float64 from bits, for integer e in [-1022, 1023] (exact, no exp2 call)."""
    e = np.asarray(e, dtype=np.int64)
    if e.size and (e.min() < -1022 or e.max() > 1023):
        raise ValueError("exponent must lie in [-1022, 1023] for a normal float64 power of two")
    return ((e + 1023) << 52).view(np.float64)


def _float_parts(b: np.ndarray, mant_bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bit patterns (int64) of a format with 8 exponent bits -> (signed integer mantissa,
    exponent, finite mask): v = m * 2**e; subnormals and zeros included, non-finite gives 0."""
    expo = (b >> mant_bits) & 0xFF
    frac = b & ((1 << mant_bits) - 1)
    mag = np.where(expo == 0, frac, frac | (1 << mant_bits))
    bias = 127 + mant_bits
    e = np.where(expo == 0, 1 - bias, expo - bias)
    m = np.where((b >> (mant_bits + 8)) & 1 == 1, -mag, mag)
    finite = expo != 0xFF
    return np.where(finite, m, 0), np.where(finite, e, 0), finite


def bf16_parts(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """bf16 bit patterns -> (signed integer mantissa, exponent, finite mask): v = m * 2**e.

    Normal: m = +-(128 + frac), e = E - 134; subnormal: m = +-frac, e = -133; zeros give m = 0.
    """
    return _float_parts(bits.astype(np.int64), 7)


def f32_parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float32 values -> (signed integer mantissa, exponent, finite mask): v = m * 2**e."""
    return _float_parts(np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.int64), 23)


def exact_weighted_sum(a: np.ndarray, a_bits: int, m: np.ndarray, f: np.ndarray) -> np.ndarray:
    """RN_float64( sum_h a[r, h, t] * m[r, h] * 2**f[r, h] ), rounded once. -> float64 [R, T].

    a: float64 [R, H, T], integer valued, 0 <= a < 2**a_bits (a_bits <= 53).
    m: int64 [R, H] signed integer mantissas; f: int64 [R, H] exponents.
    Method: |m| is split into pieces so that each term a * piece is an exact int64 < 2**53;
    a term with exponent s (relative to the row's smallest) goes, shifted by s % 4, into the
    base-16 digit s // 4 of an int64 digit array. After every 64 terms the carries are
    propagated (digits back into [0, 16)), so no digit ever exceeds 2**62. At the end the top
    digits are gathered into one int64 of at least 59 significant bits with a sticky bit for
    the rest (round to odd), and that integer is converted to float64 once (nearest-even):
    one correct rounding overall. Scaling by the row's power of two is exact for normal
    float64 results.
    """
    R, H, T = a.shape
    m = np.asarray(m, dtype=np.int64)
    f = np.asarray(f, dtype=np.int64)
    mag = np.abs(m)
    m_bits = int(mag.max()).bit_length() if mag.size else 0
    width = max(1, 53 - a_bits)  # bits per piece of |m|
    pieces = max(1, -(-m_bits // width))
    sign = np.where(m < 0, -1.0, 1.0)
    live = m != 0
    big = np.iinfo(np.int64).max
    base = np.where(live, f, big).min(axis=1) if H else np.zeros(R, np.int64)  # [R]
    base = np.where(base == big, 0, base)
    shift = np.where(live, f - base[:, None], 0)  # [R, H] >= 0
    top = (int(shift.max()) if shift.size else 0) + width * (pieces - 1)
    # a term spans 56 bits from its digit; the sum of all terms needs log2(terms) more
    n_limbs = (top + 56 + (H * pieces).bit_length()) // LIMB_BITS + 2
    acc = np.zeros((R, n_limbs, T), dtype=np.int64)
    rows = np.arange(R)
    pending = 0
    for p in range(pieces):
        piece = sign * ((mag >> (width * p)) & ((1 << width) - 1)).astype(np.float64)  # [R, H]
        s = shift + width * p
        limb, sub = s // LIMB_BITS, s % LIMB_BITS
        for h in range(H):
            if not piece[:, h].any():
                continue
            term = (a[:, h, :] * piece[:, h, None]).astype(np.int64)  # exact: < 2**53
            term <<= sub[:, h, None]
            acc[rows, limb[:, h], :] += term
            pending += 1
            if pending == _BATCH:
                _carry(acc)
                pending = 0
    return _round_limbs(acc) * pow2_f64(base)[:, None]


def _carry(acc: np.ndarray) -> None:
    """Propagate carries in place: digits 0..n-2 into [0, 16), the top digit keeps the sign."""
    for j in range(acc.shape[1] - 1):
        carry = acc[:, j] >> LIMB_BITS
        acc[:, j] -= carry << LIMB_BITS
        acc[:, j + 1] += carry


def _round_limbs(acc: np.ndarray) -> np.ndarray:
    """Correctly rounded float64 of sum_j acc[:, j, :] * 2**(LIMB_BITS*j) (int64 digits)."""
    R, n, T = acc.shape
    radix = np.int64(1 << LIMB_BITS)
    _carry(acc)
    top = acc[:, n - 1].copy()
    low = np.full((R, T), n - 1, dtype=np.int64)
    sticky = np.zeros((R, T), dtype=bool)
    for j in range(n - 2, -1, -1):
        digit = acc[:, j]
        take = np.abs(top) < _STOP  # once large, a cell stops taking digits for good
        top = np.where(take, top * radix + digit, top)
        low = np.where(take, j, low)
        sticky |= ~take & (digit != 0)
    top = np.where(sticky, top | 1, top)  # round to odd below the kept digits
    return top.astype(np.float64) * pow2_f64(low * LIMB_BITS)


def add_round_f32(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """fl32(x + y), one rounding, for float64 x, y whose values are exact (finite, no overflow).

    TwoSum gives the exact error of the float64 sum; an inexact sum with an even last bit is
    moved one ulp toward the error (round to odd at 53 bits), then rounded to float32 once.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    s = x + y
    bb = s - x
    err = (x - (s - bb)) + (y - bb)
    bits = np.ascontiguousarray(s).view(np.int64).copy()
    odd_fix = (err != 0) & ((bits & 1) == 0)
    toward = np.where(np.signbit(err) == np.signbit(s), 1, -1)
    bits = np.where(odd_fix, bits + toward, bits)
    return bits.view(np.float64).astype(np.float32)


def f32_of_exact(num: int, exp: int) -> np.float32:
    """The float32 nearest (ties to even) to num * 2**exp, Python integers; inf past the range."""
    if num == 0:
        return np.float32(0.0)
    negative = num < 0
    n = -num if negative else num
    top = n.bit_length() - 1 + exp  # 2**top <= value < 2**(top + 1)
    lsb = max(top - 23, -149)  # exponent of the last kept bit (subnormals keep fewer)
    shift = lsb - exp
    if shift > 0:
        q, r = divmod(n, 1 << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
        n, exp = q, lsb
    if n.bit_length() + exp > 128:
        value = math.inf
    else:
        value = math.ldexp(float(n), exp)  # exact: n < 2**25
    return np.float32(-value if negative else value)


def f64_of_exact(value: Fraction) -> float:
    """The float64 nearest (ties to even) to an exact rational (Fraction rounds correctly)."""
    return float(value)
