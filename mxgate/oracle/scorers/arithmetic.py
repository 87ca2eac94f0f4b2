"""The arithmetic of the scorer oracles, written once for every scorer family.

* Rounding helpers: real values (exact weighted head sums, exact rationals, sums of
  float64 values) rounded once to float64 or float32. Integer operations, float64 + - * where
  the result is representable (or rounded to odd, then once), comparisons; no platform
  transcendental is involved.
* Float32 head-summation orders the emulated scorers can follow.
* The rigorous error bounds (derivations in docs/ops/logits.md).

Bound notation: u = 2^-24 (float32 unit roundoff), eta = 2^-150 (largest absolute error of a
float32 rounding that lands in the subnormal range), gamma_k = k u / (1 - k u).
Per cell (row, token): r_h = relu(qk_h), w_h the weight, delta_h a bound on
|qk_h(backend) - qk_h| (the qk model), and
    R = sum_h r_h |w_h|,  D = sum_h delta_h |w_h|,  rho = sum_h r_h,  Delta = sum_h delta_h.
All bound arithmetic runs in float64 on non-negative terms; the result is multiplied by
(1 + 2^-40), which covers the float64 rounding of its own evaluation (at most a few hundred
operations of relative error 2^-53 each).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction
from types import ModuleType
from typing import Any

import numpy as np

from mxgate.oracle.scorers.common import ANY_ORDER, GROUPS, KSTEPS, MFMA_M, QK_MODELS
# pow2_f64 (2**e as float64 from bits) is the namespace module's; the scorers import it from here
from mxgate.oracle.xp import bits, bits64, device, floats64, namespace, pow2_f64, to_numpy  # noqa: F401

# ---- rounding real values once ----------------------------------------------------------------

LIMB_BITS = 4  # digit width of the limb accumulator (see weighted_sum_f64)
_BATCH = 64  # terms added between carry passes: 64 * 2**56 = 2**62 < 2**63
_STOP = 1 << (62 - LIMB_BITS)  # |M| >= 2^58: 59+ significant bits, enough to round to odd
_INT64_MAX = (1 << 63) - 1


def _float_parts(b: Any, mant_bits: int) -> tuple[Any, Any, Any]:
    """Bit patterns (int64, non-negative) of a format with 8 exponent bits -> (signed integer
    mantissa, exponent, finite mask): v = m * 2**e; subnormals and zeros included, non-finite
    gives 0."""
    xp = namespace(b)
    expo = (b >> mant_bits) & 0xFF
    frac = b & ((1 << mant_bits) - 1)
    mag = xp.where(expo == 0, frac, frac | (1 << mant_bits))
    bias = 127 + mant_bits
    e = xp.where(expo == 0, 1 - bias, expo - bias)
    m = xp.where((b >> (mant_bits + 8)) & 1 == 1, -mag, mag)
    finite = expo != 0xFF
    return xp.where(finite, m, 0), xp.where(finite, e, 0), finite


def bf16_parts(bf16: Any) -> tuple[Any, Any, Any]:
    """bf16 bit patterns (uint16, or int16 with the same bits) -> (signed integer mantissa,
    exponent, finite mask): v = m * 2**e.

    Normal: m = +-(128 + frac), e = E - 134; subnormal: m = +-frac, e = -133; zeros give m = 0.
    """
    xp = namespace(bf16)
    return _float_parts(xp.astype(bf16, xp.int64) & 0xFFFF, 7)


def f32_parts(x: Any) -> tuple[Any, Any, Any]:
    """float32 values -> (signed integer mantissa, exponent, finite mask): v = m * 2**e."""
    xp = namespace(x)
    return _float_parts(xp.astype(bits(xp.asarray(x, dtype=xp.float32)), xp.int64) & 0xFFFFFFFF, 23)


def float_dyadic(x: float) -> tuple[int, int]:
    """(m, e) with m * 2**e == x exactly, for a finite float64 (53-bit m; a float32 fits): the
    scalar form of f32_parts for the scorers' per-step loops (~0.4 us where an array of one
    costs ~25 us)."""
    fraction, exponent = math.frexp(x)
    return int(fraction * (1 << 53)), exponent - 53


def weighted_sum_f64(a: Any, a_bits: int, m: Any, f: Any) -> Any:
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
    float64 results. Integer operations only: every namespace gives the same digits.
    """
    xp = namespace(a, m, f)
    R, H, T = a.shape
    m = xp.astype(xp.asarray(m), xp.int64)
    f = xp.astype(xp.asarray(f), xp.int64)
    mag = xp.abs(m)
    m_bits = int(xp.max(mag)).bit_length() if m.shape[0] * H else 0
    width = max(1, 53 - a_bits)  # bits per piece of |m|
    pieces = max(1, -(-m_bits // width))
    sign = xp.where(m < 0, -1.0, 1.0)
    live = m != 0
    base = xp.min(xp.where(live, f, _INT64_MAX), axis=1) if H else xp.zeros(R, dtype=xp.int64, device=device(a))
    base = xp.where(base == _INT64_MAX, 0, base)  # [R]
    shift = xp.where(live, f - base[:, None], 0)  # [R, H] >= 0
    top = (int(xp.max(shift)) if R * H else 0) + width * (pieces - 1)
    # a term spans 56 bits from its digit; the sum of all terms needs log2(terms) more
    n_limbs = (top + 56 + (H * pieces).bit_length()) // LIMB_BITS + 2
    acc = xp.zeros((R, n_limbs, T), dtype=xp.int64, device=device(a))
    rows = xp.arange(R, device=device(a))
    pending = 0
    for p in range(pieces):
        piece = sign * xp.astype((mag >> (width * p)) & ((1 << width) - 1), xp.float64)  # [R, H]
        s = shift + width * p
        limb, sub = s // LIMB_BITS, s % LIMB_BITS
        used = to_numpy(xp.any(piece != 0, axis=0)).tolist() if R else [False] * H  # one host read
        for h in range(H):
            if not used[h]:
                continue
            term = xp.astype(a[:, h, :] * piece[:, h, None], xp.int64)  # exact: < 2**53
            term <<= sub[:, h, None]
            acc[rows, limb[:, h], :] += term
            pending += 1
            if pending == _BATCH:
                _carry(acc)
                pending = 0
    return _round_limbs(acc) * pow2_f64(base)[:, None]


def _carry(acc: Any) -> None:
    """Propagate carries in place: digits 0..n-2 into [0, 16), the top digit keeps the sign."""
    for j in range(acc.shape[1] - 1):
        carry = acc[:, j] >> LIMB_BITS
        acc[:, j] -= carry << LIMB_BITS
        acc[:, j + 1] += carry


def _round_limbs(acc: Any) -> Any:
    """Correctly rounded float64 of sum_j acc[:, j, :] * 2**(LIMB_BITS*j) (int64 digits)."""
    xp = namespace(acc)
    R, n, T = acc.shape
    _carry(acc)
    top = xp.asarray(acc[:, n - 1], copy=True)
    low = xp.full((R, T), n - 1, dtype=xp.int64, device=device(acc))
    sticky = xp.zeros((R, T), dtype=xp.bool, device=device(acc))
    for j in range(n - 2, -1, -1):
        digit = acc[:, j]
        take = xp.abs(top) < _STOP  # once large, a cell stops taking digits for good
        top = xp.where(take, top * (1 << LIMB_BITS) + digit, top)
        low = xp.where(take, j, low)
        sticky |= ~take & (digit != 0)
    top = xp.where(sticky, top | 1, top)  # round to odd below the kept digits
    return xp.astype(top, xp.float64) * pow2_f64(low * LIMB_BITS)


def dyadic_sum_f64(v: np.ndarray, x: np.ndarray) -> np.ndarray:
    """RN_float64( sum_k v[r, k] * 2**x[r, k] ) per row, rounded once. -> float64 [R] (NumPy).

    v: int64 [R, K] with bits(max |v|) + 3 + bits(K) <= 53; x: int64 [R, K], the nonzero result
    a normal float64. The digit array of weighted_sum_f64 filled in one pass: a term with
    exponent s above its row's smallest goes, shifted by s % 4, into digit s // 4; np.bincount
    adds each digit's terms in float64, exactly (integers, |partial sums| < K * 2**(bits + 3)
    <= 2**53, so in any order), and _round_limbs rounds once.
    """
    R, K = v.shape
    v_bits = int(np.abs(v).max(initial=0)).bit_length()
    if v_bits + LIMB_BITS - 1 + K.bit_length() > 53:
        raise ValueError(f"dyadic_sum_f64: {K} terms of {v_bits} bits could round in float64")
    live = v != 0
    base = np.where(live, x, _INT64_MAX).min(axis=1, initial=_INT64_MAX)
    base = np.where(base == _INT64_MAX, 0, base)  # [R]
    s = np.where(live, x - base[:, None], 0)
    # digits for every term, and for the sum (log2(K) bits more) with its sign on top
    n_limbs = (int(s.max(initial=0)) + v_bits + K.bit_length()) // LIMB_BITS + 2
    slot = np.arange(R)[:, None] * n_limbs + s // LIMB_BITS
    digits = np.bincount(slot.ravel(), weights=(v * (1 << s % LIMB_BITS)).ravel().astype(np.float64),
                         minlength=R * n_limbs)
    return _round_limbs(digits.astype(np.int64).reshape(R, n_limbs, 1))[:, 0] * pow2_f64(base)


def add_round_f32(x: Any, y: Any) -> Any:
    """fl32(x + y), one rounding, for float64 x, y whose values are exact.

    TwoSum gives the exact error of the float64 sum; an inexact sum with an even last bit is
    moved one ulp toward the error (round to odd at 53 bits), then rounded to float32 once.
    A sum that is not finite (an operand was +-Inf or NaN) is left as it is: its TwoSum error is
    a NaN whose sign differs between hosts (x86 sets it, CUDA does not), so it must decide nothing.
    """
    xp = namespace(x, y)
    x = xp.asarray(x, dtype=xp.float64)
    y = xp.asarray(y, dtype=xp.float64)
    s = x + y
    bb = s - x
    err = (x - (s - bb)) + (y - bb)
    b = bits64(s)
    odd_fix = (err != 0) & ((b & 1) == 0) & xp.isfinite(s)
    toward = xp.where(xp.signbit(err) == xp.signbit(s), 1, -1)
    return xp.astype(floats64(xp.where(odd_fix, b + toward, b)), xp.float32)


def exact_matmul(a: Any, b: Any) -> Any:
    """a @ b in float64, for operands whose products and partial sums the caller proves exact
    (integer-valued dots): exact in any order, so any BLAS gives the same values. float64 also
    keeps clear of TF32, which a float32 matmul on a GPU may use."""
    xp = namespace(a, b)
    return xp.matmul(xp.astype(a, xp.float64, copy=False), xp.astype(b, xp.float64, copy=False))


def f32_nearest(num: int, exp: int) -> np.float32:
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


def dyadic_total(terms: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """The exact sum of the terms num * 2**exp as (num, exp), aligned on their smallest exponent
    ((0, 0) for none): Python integers, for f32_nearest / f64_nearest to round once."""
    terms = list(terms)
    if not terms:
        return 0, 0
    low = min(e for _, e in terms)
    return sum(n << (e - low) for n, e in terms), low


def f64_nearest(num: int, exp: int) -> float:
    """The float64 nearest (ties to even) to num * 2**exp, Python integers: CPython's int-to-float
    conversion and its int / int division both round correctly (OverflowError past the range)."""
    return float(num << exp) if exp >= 0 else num / (1 << -exp)


# ---- float64 sums over heads in the bounds ---------------------------------------------------
# A bound's head sums run left to right in float64, one rounding per addition, never through a
# BLAS or a reduction whose order depends on the shape or the machine: the same bytes everywhere,
# and the same code on torch tensors follows the same order on any device.


def sum_heads(x: Any, axis: int = 1) -> Any:
    """((x_0 + x_1) + x_2) + ... over ``axis`` in float64 (0 for an empty axis)."""
    xp = namespace(x)
    x = xp.moveaxis(xp.asarray(x, dtype=xp.float64), axis, 0)
    if x.shape[0] == 0:
        return xp.zeros(x.shape[1:], dtype=xp.float64, device=device(x))
    acc = xp.asarray(x[0], copy=True)
    for h in range(1, x.shape[0]):
        acc += x[h]
    return acc


def weighted_heads(w: Any, x: Any) -> Any:
    """sum_h w[r, h] * x[r, h, t] left to right in float64 (each product rounded, then added)
    -> [R, T]; w [R, H], x [R, H, T]."""
    xp = namespace(w, x)
    return sum_heads(xp.asarray(w, dtype=xp.float64)[:, :, None] * x, axis=1)


# ---- float32 head-summation orders (all start from +0.0) ---------------------------------------
# aiter-fp4:  four partial sums S_g over heads m*16 + 4g + e (m outer, e inner), then
#             (S0 + S1) + (S2 + S3): the FlyDSL MFMA lane layout (SPEC section 7).
# sequential: ((0 + p_0) + p_1) + ... left to right.
# pairwise:   a balanced binary tree in natural order: (p0 + p1), (p2 + p3), ... then pairs of
#             pairs; an odd element at the end of a level moves up unchanged.

HEAD_ORDERS = ("aiter-fp4", "sequential", "pairwise")


def head_sum(p: Any, order: str) -> Any:
    """Sum float32 p [rows, H, tokens] over axis 1 in the named order -> float32 [rows, tokens]
    (only indexing and + on p: the same order in every namespace)."""
    H = p.shape[1]
    zero = p[:, :0].sum(1)  # +0 [rows, tokens] in p's dtype and device, zero heads included
    if order == "aiter-fp4":
        if H % MFMA_M:
            raise ValueError(f"head order 'aiter-fp4' needs heads to be a multiple of {MFMA_M}, got {H}")
        parts = []
        for g in range(4):
            acc = zero + zero  # a fresh +0 buffer
            for m in range(H // MFMA_M):
                for e in range(4):
                    acc += p[:, m * MFMA_M + 4 * g + e]
            parts.append(acc)
        return (parts[0] + parts[1]) + (parts[2] + parts[3])
    if order == "sequential":
        acc = zero + zero  # a fresh +0 buffer
        for h in range(H):
            acc += p[:, h]
        return acc
    if order == "pairwise":
        level = [p[:, h] for h in range(H)]
        if not level:
            return zero
        while len(level) > 1:
            nxt = [level[i] + level[i + 1] for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        return level[0] + zero  # the +0 start: -0 becomes +0
    raise ValueError(f"head_order must be one of {', '.join(map(repr, HEAD_ORDERS))}; got {order!r}")


# ---- rigorous error bounds -----------------------------------------------------------------------

U = math.ldexp(1.0, -24)
ETA = math.ldexp(1.0, -150)
U_BF16 = math.ldexp(1.0, -8)
ETA_BF16 = math.ldexp(1.0, -134)
PRESENTATION = math.ldexp(1.0, -51)  # |value - X| <= (2 u64 + u64^2) |X| for value = fl64(ws * fl64(Y))
INFLATE = 1.0 + math.ldexp(1.0, -40)
FP32_SAFE = math.ldexp(1.0, 125)  # above this the fp32 path may overflow: no finite bound is claimed


def gamma(k: int, u: float = U) -> float:
    """gamma_k = k u / (1 - k u), rounded up to float64."""
    if k <= 0:
        return 0.0
    exact = Fraction(k) * Fraction(u) / (1 - Fraction(k) * Fraction(u))
    g = float(exact)
    return g if Fraction(g) >= exact else float(np.nextafter(g, np.inf))


def qk_coeffs(model: str, *, groups: int, k_tiles: int, head_dim: int) -> tuple[float, int]:
    """(c, n): delta_h = c * A_h + n * eta, where A_h is the model's absolute sum (below)."""
    if model == KSTEPS:
        return gamma(k_tiles), k_tiles
    if model == GROUPS:
        return gamma(groups), groups
    if model == ANY_ORDER:
        return gamma(head_dim), head_dim
    raise ValueError(f"bound_model must be one of {', '.join(map(repr, QK_MODELS))}; got {model!r}")


def qk_delta(model: str, *, qk_abs: Any | None, group_abs: Any | None, groups: int,
             tile_abs: Any | None, k_tiles: int, dim_abs: Any | None,
             head_dim: int) -> Any:
    """delta_h, a bound on |qk(backend) - qk(exact)| under the named qk model.

    fp32-ksteps:  each 128-dim MFMA step is exact and rounds once into the fp32 accumulator:
                  gamma_{k_tiles} * sum_kt |dot_kt| + k_tiles * eta  (|qk| when k_tiles = 1).
    fp32-groups:  each 32-dim group dot is exact, rounded to fp32, and the groups are summed in
                  any fp32 order: gamma_G * sum_g |dot_g| + G * eta.  (Covers 'fp32-ksteps'.)
    any-order:    every product exact, the head_dim products summed in any fp32 order:
                  gamma_D * sum_d |q_d k_d| + D * eta.  (Covers both others.)
    """
    c, n = qk_coeffs(model, groups=groups, k_tiles=k_tiles, head_dim=head_dim)
    if model == KSTEPS:
        a = qk_abs if tile_abs is None else tile_abs
    elif model == GROUPS:
        a = group_abs
    else:
        a = dim_abs
    return c * a + n * ETA


def decode_bound(*, R: Any, D: Any, rho: Any, Delta: Any,
                 value: Any, ws: float, heads: int,
                 xp: ModuleType | None = None) -> Any:
    """Bound on |out - X| for out = fl(sum_h fl(relu(qk_h) w_h) * ws) in any head order, and
    for the prefill arrangement (w' = fl(w ws) folded first, then products or fmas): the larger
    of the two, so a backend may place weight_scale either way.

    decode:  (1+u)|ws| [gamma_H (R + D) + D + 2 H eta] + u |X| + eta
    prefill: gamma_H [(1+u)|ws|(R + D) + eta (rho + Delta)] + (1+u)|ws| D + eta Delta
             + u |ws| R + eta (rho + 2 H)
    plus the float64 presentation error of ``value`` (2^-51 |value|).
    Every bound function computes in the namespace of its arrays (``xp`` names it, else it is
    inferred): the same float64 operations in the same order on any.
    """
    xp = xp or namespace(R, D, value)
    a = abs(float(ws))
    g = gamma(heads)
    dec = (1 + U) * a * (g * (R + D) + D + 2 * heads * ETA) + U * xp.abs(value) + ETA
    pre = prefill_bound(R=R, D=D, rho=rho, Delta=Delta, ws=ws, heads=heads, finish=False)
    return _finish(xp.maximum(dec, pre), value, scale=R + D + rho + Delta, ws=ws, xp=xp)


def prefill_bound(*, R: Any, D: Any, rho: Any, Delta: Any,
                  ws: float, heads: int, value: Any | None = None,
                  finish: bool = True, xp: ModuleType | None = None) -> Any:
    """The prefill arrangement alone (see decode_bound)."""
    a = abs(float(ws))
    g = gamma(heads)
    b = (g * ((1 + U) * a * (R + D) + ETA * (rho + Delta)) + (1 + U) * a * D + ETA * Delta
         + U * a * R + ETA * (rho + 2 * heads))
    if not finish:
        return b
    return _finish(b, value, scale=R + D + rho + Delta, ws=ws, xp=xp or namespace(R, D, value))


def fp8_bound(*, R: Any, Do: Any, value: Any, heads: int,
              scale: Any, xp: ModuleType | None = None) -> Any:
    """FP8 scorer: out = sum_h fl(relu(fl(qk_h * ks)) * w_h), any head order, no final multiply.

    gamma_H (R + Do) + Do + 2 H eta, with Do = sum_h delta_o_h |w_h| and
    delta_o_h = |ks| (1+u) delta_h + u |ks| |qk_h| + eta (the rounding of qk * ks).
    """
    b = gamma(heads) * (R + Do) + Do + 2 * heads * ETA
    return _finish(b, value, scale=scale, ws=1.0, xp=xp or namespace(R, Do, value))


def bf16_chain_bound(*, R: Any, Dp: Any, P: Any, value: Any,
                     heads: int, scale: Any, xp: ModuleType | None = None) -> Any:
    """sglang profile: s = bf16(qk), p = bf16(relu(s) w), S = any-order fp32 sum, out = bf16(S).

    With Dp = sum_h |p_h - r_h w_h| bounds and P = sum_h |p_h| bounds (from the caller):
    (1 + u_b) [Dp + gamma_{H-1} P] + u_b |X| + eta_b.
    """
    xp = xp or namespace(Dp, P, value)
    b = (1 + U_BF16) * (Dp + gamma(heads - 1) * P) + U_BF16 * xp.abs(value) + ETA_BF16
    return _finish(b, value, scale=scale, ws=1.0, xp=xp)


def _finish(b: Any, value: Any | None, *, scale: Any, ws: float, xp: ModuleType) -> Any:
    """Add the presentation error, inflate for the bound's own rounding, and give up (inf)
    where the fp32 path could overflow or the value is not finite."""
    if value is not None:
        b = b + PRESENTATION * xp.abs(xp.where(xp.isfinite(value), value, 0.0))
    b = b * INFLATE
    risky = scale * max(1.0, abs(float(ws))) >= FP32_SAFE
    if value is not None:
        risky = risky | ~xp.isfinite(value)
    return xp.where(risky, math.inf, b)
