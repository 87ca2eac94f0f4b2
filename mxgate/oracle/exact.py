"""The slow, independent second model of every codec and scale rule (TestFloat-style).

The fast oracle is vectorised NumPy; this module decides every output one value at a time from
the format definitions, in exact arithmetic: Python integers and ``fractions.Fraction``, plus
``decimal`` (60 digits or more, with an error bound that is checked) for the one transcendental,
log2. Nothing here imports the fast oracle except ``mxgate.oracle.profiles``, which is data.

Values cross the API as integer bit patterns: float32 as ``int`` in [0, 2^32), codes as ``int``.
Decoders return a ``Fraction`` (``-0`` reads as 0; the ``*_f32_bits`` variants keep the sign of
zero) or the strings ``"nan"`` / ``"inf"`` for non-finite values.

Choices docs/spec.md leaves open, fixed here and documented at each function:
- a NaN divided by a scale comes out quiet (bit 22 set), sign and payload kept (as IEEE 754
  recommends and x86 float32 division does); this matters only for ``torchao_bits``;
- the scaled encoder divides exactly by default (the hardware path); ``quotient="f32"``
  models a software quantizer whose float32 quotient can overflow or underflow to a signed
  zero; byte 255 follows profile.nan_scale (2^128, or a NaN scale);
- a NaN or Inf amax gives scale byte 0xFF, clamped only under special_scale "clamped";
- a biased e8m0 exponent below 0 (amax zero or tiny, no floor) gives byte 0.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import lru_cache
from typing import Literal

from mxgate.oracle.block_element import E2M1, E4M3FN, BlockElement
from mxgate.oracle.profiles import Profile
from mxgate.oracle.profiles import get as _get_profile

Special = Literal["nan", "inf"]
Fp8Variant = Literal["fn", "fnuz"]
Fp8Overflow = Literal["nan", "saturate", "satfinite"]
Quotient = Literal["exact", "f32"]

F32_SIGN = 0x80000000
F32_ABS = 0x7FFFFFFF
F32_INF = 0x7F800000
F32_QUIET = 0x00400000
F32_CANONICAL_NAN = 0x7FC00000
F32_X86_DEFAULT_NAN = 0xFFC00000  # x86 SSE's default NaN: Inf / Inf, Inf * 0

# ---------------------------------------------------------------------------------------------
# Generic exact binary rounding
# ---------------------------------------------------------------------------------------------


def floor_log2(x: Fraction) -> int:
    """The integer e with 2^e <= x < 2^(e+1), for x > 0."""
    if x <= 0:
        raise ValueError(f"x must be positive, got {x}")
    n, d = x.numerator, x.denominator
    e = n.bit_length() - d.bit_length()
    # n/d lies in (2^(e-1), 2^(e+1)); one comparison picks the side.
    if (n << max(0, -e)) < (d << max(0, e)):
        e -= 1
    return e


def pow2(e: int) -> Fraction:
    """2^e exactly."""
    return Fraction(1 << e) if e >= 0 else Fraction(1, 1 << -e)


def round_nearest_even(x: Fraction, precision: int, emin: int) -> tuple[int, int]:
    """Round x >= 0 to nearest, ties to even, on a binary grid with `precision` significand
    bits and minimum exponent `emin` (subnormals below it), exponent unbounded above.

    Returns (sig, q) with the rounded value sig * 2^q, sig < 2^precision (and sig >= 2^(p-1)
    unless the result is subnormal or zero, in which case q = emin - precision + 1).
    """
    if x < 0:
        raise ValueError("round_nearest_even takes a magnitude")
    if x == 0:
        return 0, emin - (precision - 1)
    n, d = x.numerator, x.denominator
    if d & (d - 1) == 0:  # dyadic (every float, scaled float and exact sum of them): integers only
        return round_dyadic_nearest_even(n, 1 - d.bit_length(), precision, emin)
    q = max(floor_log2(x), emin) - (precision - 1)
    if q >= 0:
        d <<= q
    else:
        n <<= -q
    sig, rem = divmod(n, d)
    if 2 * rem > d or (2 * rem == d and sig & 1):
        sig += 1
    if sig == 1 << precision:  # rounding carried into the next binade
        sig, q = sig >> 1, q + 1
    return sig, q


def round_dyadic_nearest_even(sig: int, exp: int, precision: int, emin: int) -> tuple[int, int]:
    """round_nearest_even for the dyadic magnitude sig * 2^exp (sig >= 0), in integers only."""
    if sig < 0:
        raise ValueError("round_dyadic_nearest_even takes a magnitude")
    if sig == 0:
        return 0, emin - (precision - 1)
    q = max(exp + sig.bit_length() - 1, emin) - (precision - 1)
    shift = q - exp
    if shift <= 0:  # fits the grid: no rounding
        return sig << -shift, q
    kept, rem, half = sig >> shift, sig & ((1 << shift) - 1), 1 << (shift - 1)
    if rem > half or (rem == half and kept & 1):
        kept += 1
    if kept == 1 << precision:
        kept, q = kept >> 1, q + 1
    return kept, q


def dyadic_greater(sig_a: int, exp_a: int, sig_b: int, exp_b: int) -> bool:
    """sig_a * 2^exp_a > sig_b * 2^exp_b for non-negative integers, exactly."""
    e = min(exp_a, exp_b)
    return sig_a << (exp_a - e) > sig_b << (exp_b - e)


# ---------------------------------------------------------------------------------------------
# float32
# ---------------------------------------------------------------------------------------------


def _check_u32(bits: int, name: str = "bits") -> None:
    if not isinstance(bits, int) or isinstance(bits, bool):
        raise TypeError(f"{name} must be an int bit pattern, got {type(bits).__name__}")
    if not 0 <= bits <= 0xFFFFFFFF:
        raise ValueError(f"{name} must lie in [0, 2^32), got {bits:#x}")


def f32_sign(bits: int) -> int:
    return (bits >> 31) & 1


def f32_is_nan(bits: int) -> bool:
    return (bits & F32_ABS) > F32_INF


def f32_is_inf(bits: int) -> bool:
    return (bits & F32_ABS) == F32_INF


def f32_is_finite(bits: int) -> bool:
    return (bits & F32_INF) != F32_INF


def f32_dyadic(bits: int) -> tuple[int, int, int]:
    """(sign, sig, exp) of a finite float32: |x| = sig * 2^exp exactly."""
    _check_u32(bits)
    if not f32_is_finite(bits):
        raise ValueError(f"bits {bits:#010x} is not finite")
    return _f32_dyadic(bits)


def _f32_dyadic(bits: int) -> tuple[int, int, int]:
    """f32_dyadic for bits its caller has checked and found finite (the sweeps' inner calls)."""
    field, mant = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    if field == 0:  # subnormal: no hidden bit, exponent of the smallest normal
        return f32_sign(bits), mant, -149
    return f32_sign(bits), mant | 0x800000, field - 150


def f32_to_fraction(bits: int) -> Fraction:
    """Exact value of a finite float32 bit pattern (+0 and -0 both give 0)."""
    sign, sig, exp = f32_dyadic(bits)
    if sign:
        sig = -sig
    return Fraction(sig << exp) if exp >= 0 else Fraction(sig, 1 << -exp)


def f32_decode(bits: int) -> Fraction | Special:
    """float32 bits -> Fraction, or "nan" / "inf" (the sign of an Inf is f32_sign(bits))."""
    if f32_is_nan(bits):
        return "nan"
    if f32_is_inf(bits):
        return "inf"
    return f32_to_fraction(bits)


def fraction_to_f32_bits(x: Fraction, negative_zero: bool = False) -> int:
    """Correctly rounded (nearest, ties to even) float32 of x; overflow gives +-Inf.
    A zero result keeps the sign of x, or `negative_zero` when x is exactly 0."""
    x = Fraction(x)
    sign = 1 if x < 0 or (x == 0 and negative_zero) else 0
    return _f32_pack(sign, *round_nearest_even(abs(x), 24, -126))


def dyadic_to_f32_bits(sign: int, sig: int, exp: int) -> int:
    """fraction_to_f32_bits of (-1)^sign * sig * 2^exp (sig >= 0); a zero keeps `sign`."""
    return _f32_pack(sign, *round_dyadic_nearest_even(sig, exp, 24, -126))


def _f32_pack(sign: int, sig: int, q: int) -> int:
    """float32 bits of (-1)^sign * sig * 2^q, already rounded to 24 bits (overflow to +-Inf)."""
    if sig < 1 << 23:  # subnormal or zero: q == -149
        return (sign << 31) | sig
    field = q + 150  # sig * 2^q = (sig / 2^23) * 2^(q + 23)
    if field > 254:
        return (sign << 31) | F32_INF
    return (sign << 31) | (field << 23) | (sig - (1 << 23))


def f32_bits(value: float) -> int:
    """float32 bits of fl(value) for a Python float (correctly rounded from the double)."""
    if math.isnan(value):
        return (F32_SIGN if math.copysign(1.0, value) < 0 else 0) | F32_CANONICAL_NAN
    if math.isinf(value):
        return (F32_SIGN if value < 0 else 0) | F32_INF
    return fraction_to_f32_bits(Fraction(value), negative_zero=math.copysign(1.0, value) < 0)


def fl32(x: Fraction) -> Fraction:
    """The value of the float32 nearest to x (x must not overflow)."""
    bits = fraction_to_f32_bits(x)
    if f32_is_inf(bits):
        raise OverflowError(f"{x} overflows float32")
    return f32_to_fraction(bits)


def fl32_of_float(value: float, name: str = "value") -> Fraction:
    """The value of fl32(value) for a Python float (floors, constants) whose float32 is finite;
    ``name`` is the argument the messages name."""
    if isinstance(value, bool) or not isinstance(value, (float, int)):
        raise TypeError(f"{name} must be a float, got {type(value).__name__}")
    try:
        double = float(value)
    except OverflowError:
        double = math.inf
    result = None if math.isnan(double) else _fl32_of_float(double)  # NaNs: every one a new cache key
    if result is None:
        shown = f"an int of {value.bit_length()} bits" if isinstance(value, int) else repr(value)
        raise ValueError(f"{name} must be finite in float32, got {shown}")
    return result


# The caches below are keyed on canonical values (a float, an int, a Fraction, the variant's
# own str) checked by their public wrappers: keys that hash alike then mean the same input.
@lru_cache(maxsize=None)
def _fl32_of_float(value: float) -> Fraction | None:
    """fl32(value), or None where it is not finite in float32 (e8m0_scale asks per call)."""
    bits = f32_bits(value)
    return f32_to_fraction(bits) if f32_is_finite(bits) else None


def fl32_one_over(n: int) -> Fraction:
    """fl32(1/n): fl(1/6) = 0x3E2AAAAB, fl(1/448) = 0x3B124925, fl(1/240) = 0x3B888889."""
    return _fl32_one_over(_positive_int(n, "n"))


@lru_cache(maxsize=None)
def _fl32_one_over(n: int) -> Fraction:
    return fl32(Fraction(1, n))


def _positive_int(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


# ---------------------------------------------------------------------------------------------
# bf16
# ---------------------------------------------------------------------------------------------


def _bf16_nan(x_bits: int, rule: str) -> int:
    if rule == "sign_quiet":  # ml_dtypes: the sign and the canonical quiet NaN
        return ((x_bits >> 16) & 0x8000) | 0x7FC0
    if rule == "all_ones":  # torch 2.13 CPU
        return 0xFFFF
    if rule == "canonical":  # torch CUDA
        return 0x7FFF
    raise ValueError(f"unknown bf16_nan rule {rule!r}")


def round_bf16(x_bits: int, profile: str | Profile | None = None) -> int:
    """bf16 bits of float32 `x_bits` rounded to nearest even; overflow gives Inf. A NaN stays a
    quiet NaN: sign | 0x7FC0, or what profile.bf16_nan says when a profile is given."""
    _check_u32(x_bits, "x_bits")
    if f32_is_nan(x_bits):
        rule = "sign_quiet" if profile is None else getattr(_get_profile(profile), "bf16_nan", "sign_quiet")
        return _bf16_nan(x_bits, rule)
    if f32_is_inf(x_bits):
        return x_bits >> 16
    sign, sig, exp = _f32_dyadic(x_bits)
    sig, q = round_dyadic_nearest_even(sig, exp, 8, -126)
    if sig < 1 << 7:  # subnormal or zero: q == -133
        return (sign << 15) | sig
    field = q + 134  # sig * 2^q = (sig / 2^7) * 2^(q + 7)
    if field > 254:
        return (sign << 15) | 0x7F80
    return (sign << 15) | (field << 7) | (sig - (1 << 7))


# ---------------------------------------------------------------------------------------------
# E2M1
# ---------------------------------------------------------------------------------------------


def _check_code(code: int, limit: int, name: str = "code") -> None:
    if not isinstance(code, int) or isinstance(code, bool):
        raise TypeError(f"{name} must be an int, got {type(code).__name__}")
    if not 0 <= code < limit:
        raise ValueError(f"{name} must lie in [0, {limit}), got {code}")


@lru_cache(maxsize=None)
def _e2m1_magnitude(code: int) -> Fraction:
    """From the format: 2 exponent bits (bias 1), 1 mantissa bit, field 0 subnormal."""
    field, m = (code >> 1) & 0x3, code & 0x1
    if field == 0:
        return Fraction(m, 2)  # m * 2^(1 - bias) * 2^-1
    return (1 + Fraction(m, 2)) * pow2(field - 1)


def decode_e2m1(code: int) -> Fraction:
    """Value of an E2M1 code 0..15 (0x8, -0, reads as 0)."""
    _check_code(code, 16)
    mag = _e2m1_magnitude(code)
    return -mag if code & 0x8 else mag


def decode_e2m1_f32_bits(code: int) -> int:
    """float32 bits of an E2M1 code's value (exact; 0x8 gives -0.0)."""
    return fraction_to_f32_bits(decode_e2m1(code), negative_zero=bool(code & 0x8))


def _torchao_nan_code(bits: int) -> int:
    """torchao _f32_to_floatx_unpacked (ebits 2, mbits 1) on a NaN: the NaN fails both float
    compares (>= 6, < 1), so it takes the normal branch's int32 arithmetic on |bits|."""
    sign = f32_sign(bits)
    a = bits & F32_ABS
    mant_odd = (a >> 22) & 1  # would-be mantissa's odd bit
    val_to_add = ((1 - 127) << 23) + ((1 << 21) - 1)  # exponent rebias + magic adder
    t = (a + val_to_add + mant_odd) & 0xFFFFFFFF  # int32 wraparound
    if t >= 1 << 31:
        t -= 1 << 32
    code = (t >> 22) & 0xFF  # arithmetic shift, then .to(uint8)
    return code | (sign << 3)


def _e2m1_nan_code(bits: int, p: Profile) -> int:
    sign = f32_sign(bits)
    rule = p.nan
    if rule == "max_signed":
        return 0x7 | (sign << 3)
    if rule == "pos_max":
        return 0x7
    if rule == "neg_max":
        return 0xF
    if rule == "zero":
        return 0x0
    if rule == "inverted_zero":
        return 0x0 if sign else 0x8
    if rule == "torchao_bits":
        return _torchao_nan_code(bits)
    raise ValueError(f"unknown nan rule {rule!r}")


def _e2m1_inf_code(sign: int, p: Profile) -> int:
    if p.inf == "saturate":
        return 0x7 | (sign << 3)
    if p.inf == "neg_max":
        return 0xF
    raise ValueError(f"unknown inf rule {p.inf!r}")


def _break_tie(lo: int, hi: int, negative: bool, tie: str) -> int:
    """lo, hi: the two nearest magnitude codes (adjacent, lo < hi)."""
    if tie == "even":
        return lo if lo & 1 == 0 else hi  # even code index: mantissa bit 0
    if tie == "zero":
        return lo
    if tie == "away":
        return hi
    if tie == "down":  # toward -inf
        return hi if negative else lo
    raise ValueError(f"unknown tie rule {tie!r}")


# Every E2M1 magnitude is m/2 for an integer m: distances to them compare as integers.
_E2M1_HALVES = tuple(int(2 * _e2m1_magnitude(i)) for i in range(8))
assert all(2 * _e2m1_magnitude(i) == m for i, m in enumerate(_E2M1_HALVES))


def _encode_e2m1_dyadic(sig: int, exp: int, sign_bit: int, p: Profile) -> int:
    """E2M1 code of (-1)^sign_bit * sig * 2^exp (sig >= 0): _encode_e2m1_halves's rule."""
    negative = sign_bit == 1 and sig != 0  # -0 is not below zero
    s = exp + 1  # twice the magnitude is sig * 2^s
    if s >= 0:
        return _encode_e2m1_halves(sig << s, 1, negative, sign_bit, p)
    return _encode_e2m1_halves(sig, 1 << -s, negative, sign_bit, p)


def _encode_e2m1_halves(num: int, den: int, negative: bool, sign_bit: int, p: Profile) -> int:
    """E2M1 code of a value x whose magnitude is num / (2 den), den > 0, negative when x < 0:
    the nearest of the 8 magnitudes (so anything above 6 saturates to 6), ties per profile, then
    the sign, with the sign of a zero result per profile.zero_sign. den * |2|x| - m| = |num - m den|
    is each distance, scaled by den, in integers. The magnitudes increase, so the nearest is the
    last one at or below 2|x| or the next: only those two distances are compared."""
    lo = 0
    while lo < 7 and _E2M1_HALVES[lo + 1] * den <= num:
        lo += 1
    if lo == 7:
        i = 7
    else:
        below, above = num - _E2M1_HALVES[lo] * den, _E2M1_HALVES[lo + 1] * den - num
        i = lo if below < above else lo + 1 if above < below else _break_tie(lo, lo + 1, negative, p.tie)
    if i != 0:
        return i | (sign_bit << 3)
    if p.zero_sign == "keep":
        return sign_bit << 3
    if p.zero_sign == "if_negative":
        return 0x8 if negative else 0x0
    if p.zero_sign == "clear":
        return 0x0
    raise ValueError(f"unknown zero_sign rule {p.zero_sign!r}")


def encode_e2m1(x_bits_f32: int, profile: str | Profile) -> int:
    """E2M1 code 0..15 of one float32 value under a profile (no scaling)."""
    _check_u32(x_bits_f32, "x_bits_f32")
    return _encode_e2m1_bits(x_bits_f32, _get_profile(profile))


def _encode_e2m1_bits(bits: int, p: Profile) -> int:
    if f32_is_nan(bits):
        return _e2m1_nan_code(bits, p)
    sign = f32_sign(bits)
    if f32_is_inf(bits):
        return _e2m1_inf_code(sign, p)
    _, sig, exp = _f32_dyadic(bits)
    return _encode_e2m1_dyadic(sig, exp, sign, p)


def encode_e2m1_scaled(x_bits: int, e8m0_byte: int, profile: str | Profile, quotient: Quotient = "exact") -> int:
    """Divide x by the block scale 2^(byte - 127), then encode_e2m1.

    quotient "exact" (the hardware path): the quotient is exact. quotient "f32" (a software
    quantizer): the quotient is first rounded to float32, so it can overflow to +-Inf or
    underflow to +-0 (and profile.zero_sign then sees a zero).
    Byte 255 follows profile.nan_scale: "exponent" divides by 2^128 (the field taken
    literally); "nan" divides by a NaN scale: the quotient is x's NaN if x is one (the dividend
    comes first, as in x86 division), else the scale's +NaN 0x7FC00000; "inf" divides by +Inf:
    a zero of x's sign, an Inf x the x86 default NaN 0xFFC00000. Byte 0 divides by
    profile.scale0_divisor: 2^-127 (pow2), 2^-126 (min_normal) or 1 (one).
    A NaN x comes out of the division quiet (bit 22 set), which matters only for torchao_bits.
    """
    _check_u32(x_bits, "x_bits")
    _check_code(e8m0_byte, 256, "e8m0_byte")
    if quotient not in ("exact", "f32"):
        raise ValueError(f"quotient must be 'exact' or 'f32', got {quotient!r}")
    p = _get_profile(profile)
    if f32_is_nan(x_bits):
        return _e2m1_nan_code(x_bits | F32_QUIET, p)
    nan_scale = getattr(p, "nan_scale", "exponent")
    if e8m0_byte == 0xFF and nan_scale == "nan":
        return _e2m1_nan_code(F32_CANONICAL_NAN, p)
    sign = f32_sign(x_bits)
    if e8m0_byte == 0xFF and nan_scale == "inf":  # x / +Inf
        if f32_is_inf(x_bits):
            return _e2m1_nan_code(F32_X86_DEFAULT_NAN, p)
        return _encode_e2m1_dyadic(0, 0, sign, p)
    if f32_is_inf(x_bits):
        return _e2m1_inf_code(sign, p)
    _, sig, exp = _f32_dyadic(x_bits)
    exp -= _e8m0_divisor_log2(e8m0_byte, p)  # x / 2^k, exactly: only the exponent moves
    if quotient == "f32":
        return _encode_e2m1_bits(dyadic_to_f32_bits(sign, sig, exp), p)
    return _encode_e2m1_dyadic(sig, exp, sign, p)


def _e8m0_divisor_log2(e8m0_byte: int, p: Profile) -> int:
    """k, where a finite element is divided by 2^k under a byte (255 only taken literally):
    byte - 127, and for byte 0 profile.scale0_divisor's -127 (pow2), -126 (min_normal) or 0 (one)."""
    if e8m0_byte == 0:
        return {"pow2": -127, "min_normal": -126, "one": 0}[getattr(p, "scale0_divisor", "pow2")]
    return e8m0_byte - 127


def scaled_f32_bits(x_bits: int, e8m0_byte: int, profile: str | Profile) -> int:
    """float32 bits of x divided by the block scale 2^(byte - 127), rounded to float32 (+-Inf
    past its range), with encode_e2m1_scaled's rules for NaN, Inf, byte 0 and byte 255."""
    _check_u32(x_bits, "x_bits")
    _check_code(e8m0_byte, 256, "e8m0_byte")
    p = _get_profile(profile)
    if f32_is_nan(x_bits):
        return x_bits | F32_QUIET
    nan_scale = getattr(p, "nan_scale", "exponent")
    if e8m0_byte == 0xFF and nan_scale == "nan":
        return F32_CANONICAL_NAN
    sign = f32_sign(x_bits) << 31
    if e8m0_byte == 0xFF and nan_scale == "inf":  # x / +Inf
        return F32_X86_DEFAULT_NAN if f32_is_inf(x_bits) else sign
    if f32_is_inf(x_bits):
        return x_bits
    _, sig, exp = f32_dyadic(x_bits)
    # Byte 255 divides by 2^128; a quotient from 2^128 - 2^103 up rounds past FLT_MAX to +-Inf.
    exp -= _e8m0_divisor_log2(e8m0_byte, p)
    return dyadic_to_f32_bits(sign >> 31, sig, exp)


# ---------------------------------------------------------------------------------------------
# log2f: a correctly rounded float32 log2, decided with Decimal and a checked error bound
# ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=8)
def _ln2(prec: int) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = prec
        return Decimal(2).ln()


def _log2_approx(r: Fraction, prec: int) -> Fraction:
    """log2(r) for r in (1, 2) with absolute error below 10^-(prec - 3)."""
    with localcontext() as ctx:
        ctx.prec = prec
        # Each step (division, ln, division) is correctly rounded to prec digits and
        # |ln r|, |log2 r| < 1, so the total error stays within a few units of 10^(1 - prec).
        y = Decimal(r.numerator) / Decimal(r.denominator)
        return Fraction(y.ln() / _ln2(prec))


def log2f_value(s: Fraction) -> Fraction:
    """The value of fl32(log2(s)), the float32 nearest to the true log2, for s > 0."""
    if isinstance(s, bool) or not isinstance(s, (Fraction, int)):
        raise TypeError(f"s must be a Fraction or an int, got {type(s).__name__}")
    if s <= 0:
        raise ValueError(f"s must be positive, got {s}")
    return _log2f_value(Fraction(s))


# 2^17: a sweep over every bf16 and the boundaries (~97k values) may ask for each, in the same
# order per profile, and an LRU smaller than that evicts every entry before its reuse (the scale
# policies' ceil and floor of it ask only near powers of two: _ceil_log2f, _floor_log2f)
@lru_cache(maxsize=1 << 17)
def _log2f_value(s: Fraction) -> Fraction:
    e = floor_log2(s)
    r = s / pow2(e)
    if r == 1:
        return Fraction(e)  # an exact power of two: log2 is an integer, representable
    for prec in _LOG2_PRECISIONS:
        approx = e + _log2_approx(r, prec)
        eps = Fraction(1, 10 ** (prec - 3))
        lo, hi = fraction_to_f32_bits(approx - eps), fraction_to_f32_bits(approx + eps)
        if lo == hi:  # the whole error interval rounds to one float32
            return f32_to_fraction(lo)
    raise ArithmeticError(f"log2({s}) too close to a float32 midpoint")


# Decimal digits tried in turn. 20 (an error bound of 1e-17 against a float32 step of at least
# 2^-46 ~ 1.4e-14 near log2 = 0) decides nearly every float32 input, at under half the cost of
# 60; each later step is tried only where the one before left the interval across a rounding
# boundary, up to the same 1920 digits as before.
_LOG2_PRECISIONS = (20, 60, 120, 240, 480, 960, 1920)


def log2f_bits(s_bits_f32: int) -> int:
    """float32 bits of the correctly rounded log2 of a positive finite float32."""
    return fraction_to_f32_bits(log2f_value(_positive_f32(s_bits_f32)))


def _positive_f32(bits: int) -> Fraction:
    _check_u32(bits, "s_bits_f32")
    if not f32_is_finite(bits) or f32_sign(bits) or bits == 0:
        raise ValueError(f"s must be a positive finite float32, got {bits:#010x}")
    return f32_to_fraction(bits)


def ceil_log2f(s_bits_f32: int) -> int:
    """ceil(fl32(log2(s))) for a positive finite float32 s (subnormals included)."""
    return _ceil_log2f(_positive_f32(s_bits_f32))


# ceil and floor of fl32(log2 s) without the logarithm where log2 s lies 2^-16 or more inside
# (k, k + 1), k = floor(log2 s). Every float32 next to an integer n with |n| < 256 lies within
# 2^-16 of it, and rounding is monotone, so fl32(x) > n for x >= n + 2^-16 and fl32(x) < n for
# x <= n - 2^-16. For s = 2^k (1 + t), t in (0, 1): log2(1 + t) >= t (concave, equal at 0 and
# 1), so t >= 2^-16 puts log2 s at least 2^-16 above k; for s = 2^(k+1) (1 - t):
# log2(1 - t) <= -t, so t >= 2^-16 puts it at least 2^-16 below k + 1. Only the s within 2^-16
# (relative) of a power of two need the correctly rounded value.
_NEAR_POW2 = 16


def _ceil_log2f(s: Fraction) -> int:
    k = floor_log2(s)
    base = pow2(k)
    if s == base:
        return k
    if abs(k) < 250 and s >= base + pow2(k - _NEAR_POW2):
        return k + 1
    return math.ceil(log2f_value(s))


def _floor_log2f(s: Fraction) -> int:
    k = floor_log2(s)
    if abs(k) < 250 and s <= pow2(k + 1) - pow2(k + 1 - _NEAR_POW2):
        return k
    return math.floor(log2f_value(s))


def binade_base_bits(k: int) -> int:
    """float32 bits of 2^k, k in [-149, 127]."""
    if not -149 <= k <= 127:
        raise ValueError(f"k must lie in [-149, 127], got {k}")
    return (k + 127) << 23 if k >= -126 else 1 << (k + 149)


def binade_size(k: int) -> int:
    """Number of float32 values in [2^k, 2^(k+1))."""
    return 1 << 23 if k >= -126 else 1 << (k + 149)


def log2f_threshold(k: int) -> int:
    """J(k): the largest j with fl32(log2(bits(2^k) + j)) == k exactly (0 if none).

    j counts float32 steps above 2^k (the mantissa for normal k). fl32(log2 s) is monotone in
    s and exceeds k once it stops being k, so the affected mantissas are exactly 1..J(k).
    """
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    binade_base_bits(k)  # range check
    return _log2f_threshold(int(k))


@lru_cache(maxsize=None)
def _log2f_threshold(k: int) -> int:
    base = binade_base_bits(k)
    j = 0
    while j + 1 < binade_size(k) and log2f_value(f32_to_fraction(base + j + 1)) == k:
        j += 1
    return j


def log2f_affected_mantissas(k: int) -> list[int]:
    """The j >= 1 for which s = bits(2^k) + j has ceil(log2f(s)) == k although s > 2^k.
    Normal k in [-126, 127]: j is the mantissa field, and the bitwise ceil_pow2 gives k + 1;
    subnormal k in [-149, -127]: j counts steps of 2^-149 above 2^k."""
    return list(range(1, log2f_threshold(k) + 1))


def log2f_affected_counts() -> dict[int, int]:
    """k -> number of affected float32 values in [2^k, 2^(k+1)), for k in [-149, 127]."""
    return {k: log2f_threshold(k) for k in range(-149, 128)}


def ue8m0_round(s_bits_f32: int, rounding: Literal["log2f", "bitwise"] = "log2f") -> int:
    """float32 bits of the power-of-two scale for a positive finite s (SPEC 4):
    log2f: exp2f(ceilf(log2f(s))) with a correctly rounded log2f (2^128 gives +Inf);
    bitwise: SPEC 3.2's ceil_pow2 on bits (a subnormal s gives 2^-126)."""
    if rounding == "log2f":
        k = ceil_log2f(s_bits_f32)
    elif rounding == "bitwise":
        _positive_f32(s_bits_f32)
        k = ceil_pow2_field(s_bits_f32) - 127
    else:
        raise ValueError(f"rounding must be 'log2f' or 'bitwise', got {rounding!r}")
    return F32_INF if k > 127 else fraction_to_f32_bits(pow2(k))


def fp8_token_scale(
    amax_bits_f32: int,
    fp8_max: int,
    arithmetic: Literal["reciprocal", "divide"],
    amax_floor: float,
    scale_fmt: str | None = None,
    rounding: Literal["log2f", "bitwise"] = "log2f",
) -> int:
    """float32 bits of the indexer's FP8 per-token scale (SPEC 4): s = fl(max(amax, fl(floor)) *
    fl(1/fp8_max)) ("reciprocal", Q) or fl(max(amax, fl(floor)) / fp8_max) ("divide", K);
    scale_fmt "ue8m0" rounds s up to a power of two. A NaN amax gives NaN, +Inf gives +Inf."""
    _check_u32(amax_bits_f32, "amax_bits_f32")
    floor = fl32_of_float(amax_floor, "amax_floor")
    if floor < 0:
        raise ValueError(f"amax_floor must be >= 0, got {amax_floor!r}")
    fp8_max = _positive_int(fp8_max, "fp8_max")
    if scale_fmt is not None and scale_fmt != "ue8m0":
        raise ValueError(f"scale_fmt must be None or 'ue8m0', got {scale_fmt!r}")
    if f32_is_nan(amax_bits_f32):
        return F32_CANONICAL_NAN
    if f32_is_inf(amax_bits_f32):
        return F32_INF
    amax = max(abs(f32_to_fraction(amax_bits_f32)), floor)
    if arithmetic == "reciprocal":
        s = fraction_to_f32_bits(amax * fl32_one_over(fp8_max))
    elif arithmetic == "divide":
        s = fraction_to_f32_bits(amax / fp8_max)
    else:
        raise ValueError(f"arithmetic must be 'reciprocal' or 'divide', got {arithmetic!r}")
    return ue8m0_round(s, rounding) if scale_fmt == "ue8m0" else s


# ---------------------------------------------------------------------------------------------
# E8M0
# ---------------------------------------------------------------------------------------------


def decode_e8m0(byte: int, profile: str | Profile = "gfx950") -> Fraction | Special:
    """2^(byte - 127); byte 0 and byte 255 per profile.byte0 / profile.byte255."""
    _check_code(byte, 256, "byte")
    p = _get_profile(profile)
    if byte == 0xFF:
        return "nan" if p.byte255 == "nan" else "inf"
    if byte == 0 and p.byte0 == "zero":
        return Fraction(0)
    return pow2(byte - 127)


def ceil_pow2_field(v_bits: int) -> int:
    """SPEC 3.2's bitwise ceil_pow2: the exponent field of v, plus one when the mantissa is not
    zero and the field is not 0xFF (so any subnormal gives 1, zero gives 0)."""
    field, mant = (v_bits >> 23) & 0xFF, v_bits & 0x7FFFFF
    if field != 0xFF and mant != 0:
        field += 1
    return field


def _amax_over_max(amax: Fraction, arithmetic: str, element: BlockElement) -> Fraction:
    top = int(element.max_value)
    if arithmetic == "reciprocal":
        return fl32(amax * fl32_one_over(top))
    if arithmetic == "divide":
        return fl32(amax / top)
    raise ValueError(f"unknown scale_arithmetic {arithmetic!r}")


def _even_biased(amax_bits: int, element: BlockElement) -> int | None:
    """SPEC 3.2 even: (bits(amax) + 2^(22 - mbits)) & 0xFF800000 (amax's mantissa rounded to the
    element's mantissa bits, half up), then floor log2, minus emax. None for a result of 0
    (log2 = -inf)."""
    r = (amax_bits + element.even_round_bit) & 0xFF800000
    field = (r >> 23) & 0xFF
    if field == 0xFF:  # rounded up into the Inf pattern
        return 0xFF
    if field == 0:
        return None
    return field - element.emax


def _policy_biased(amax: Fraction, p: Profile, floor_value: Fraction | None, element: BlockElement) -> int | None:
    """Biased exponent before clamping; None stands for -inf (log2 of 0)."""
    policy = p.scale_policy
    if policy in ("rceil", "rceil_log2f", "rceil_exact"):
        v = _amax_over_max(amax, p.scale_arithmetic, element)
        if floor_value is not None and p.floor_where == "after":
            v = max(v, floor_value)
        if policy == "rceil":
            return ceil_pow2_field(fraction_to_f32_bits(v))
        if policy == "rceil_exact":  # ceil(log2 v) with no rounding of the log2 (cvt.rp)
            if v == 0:
                return None
            k = floor_log2(v)
            return k + (v != pow2(k)) + 127
        return None if v == 0 else _ceil_log2f(v) + 127
    if amax == 0:
        return None
    if policy == "floor":
        return floor_log2(amax) - element.emax + 127
    if policy == "floor_log2f":  # floor of a correctly rounded log2f
        return _floor_log2f(amax) - element.emax + 127
    if policy == "ceil":
        return ceil_pow2_field(fraction_to_f32_bits(amax)) - element.emax
    if policy == "even":
        return _even_biased(fraction_to_f32_bits(amax), element)
    raise ValueError(f"unknown scale_policy {policy!r}")


def e8m0_scale(amax_bits_f32: int, profile: str | Profile, element: BlockElement = E2M1) -> int:
    """The e8m0 byte of a block of `element` values whose amax has float32 bits `amax_bits_f32`
    (the element's largest value and its power of two: 6 and 2^2 for E2M1, 448 and 2^8 for E4M3FN).

    amax's sign bit is ignored (it is a magnitude). A NaN/Inf amax gives the exponent field
    0xFF: returned as is (profile.special_scale "nan_byte") or clamped like any other
    ("clamped"). The floor is fl32 of profile.amax_floor; "before" raises amax, "after" raises
    v = amax/6 (rceil policies; the other policies have no v and apply the floor to amax). The
    biased exponent is clamped to profile.exp_clamp, then to [0, 255].
    """
    _check_u32(amax_bits_f32, "amax_bits_f32")
    p = _get_profile(profile)
    a = amax_bits_f32 & F32_ABS
    if not f32_is_finite(a):
        special = getattr(p, "special_scale", "nan_byte")
        if special in ("satfinite", "inf_field") and not f32_is_nan(a):
            if special == "satfinite":
                return 0xFE  # cvt.rp.satfinite: the largest finite e8m0
            return 0xFF - element.emax if p.scale_policy in ("floor", "floor_log2f", "ceil") else 0xFF
        if special != "clamped" or p.exp_clamp is None:
            return 0xFF
        return min(max(0xFF, p.exp_clamp[0]), p.exp_clamp[1])
    amax = f32_to_fraction(a)
    floor_value = None if p.amax_floor is None else fl32_of_float(float(p.amax_floor))
    has_v = p.scale_policy in ("rceil", "rceil_log2f", "rceil_exact")
    if floor_value is not None and (p.floor_where == "before" or not has_v):
        amax = max(amax, floor_value)
    biased = _policy_biased(amax, p, floor_value, element)
    if biased is None:
        biased = -(1 << 30)  # -inf: below any clamp
    if p.exp_clamp is not None:
        lo, hi = p.exp_clamp
        biased = min(max(biased, lo), hi)
    return min(max(biased, 0), 0xFF)


# ---------------------------------------------------------------------------------------------
# E4M3 (fn: OCP / gfx950 / NVIDIA; fnuz: gfx942)
# ---------------------------------------------------------------------------------------------

_E4M3_BIAS = {"fn": 7, "fnuz": 8}


def _check_variant(variant: str) -> int:
    return _E4M3_BIAS[_variant(variant)]


def _variant(variant: str) -> str:
    """The variant's canonical str (the cache key of e4m3_max)."""
    for name in _E4M3_BIAS:
        if isinstance(variant, str) and variant == name:
            return name
    raise ValueError(f"variant must be 'fn' or 'fnuz', got {variant!r}")


def _e4m3_is_nan(code: int, variant: str) -> bool:
    if variant == "fn":
        return code & 0x7F == 0x7F  # all exponent and mantissa bits set
    return code == 0x80  # fnuz: the "negative zero" pattern


def _e4m3_magnitude(code: int, bias: int) -> Fraction:
    field, m = (code >> 3) & 0xF, code & 0x7
    if field == 0:
        return m * pow2(1 - bias - 3)
    return (8 + m) * pow2(field - bias - 3)


def decode_e4m3(code: int, variant: Fp8Variant = "fn") -> Fraction | Literal["nan"]:
    """Value of an e4m3 code (fn 0x80, -0, reads as 0)."""
    _check_code(code, 256)
    bias = _check_variant(variant)
    if _e4m3_is_nan(code, variant):
        return "nan"
    mag = _e4m3_magnitude(code, bias)
    return -mag if code & 0x80 else mag


def decode_e4m3_f32_bits(code: int, variant: Fp8Variant = "fn") -> int:
    """float32 bits of an e4m3 code (exact; fn 0x80 gives -0.0; NaN gives 0x7FC00000|sign)."""
    value = decode_e4m3(code, variant)
    if value == "nan":
        return F32_CANONICAL_NAN | ((code & 0x80) << 24 if variant == "fn" else 0)
    return fraction_to_f32_bits(value, negative_zero=bool(code & 0x80))


def e4m3_max(variant: Fp8Variant) -> Fraction:
    """Largest finite magnitude, found from the code space itself."""
    return _e4m3_max(_variant(variant))


@lru_cache(maxsize=None)
def _e4m3_max(variant: str) -> Fraction:
    bias = _check_variant(variant)
    return max(_e4m3_magnitude(c, bias) for c in range(0x80) if not _e4m3_is_nan(c, variant))


@lru_cache(maxsize=None)
def _e4m3_code_of_max(variant: str) -> int:  # called with canonical variants only
    bias, top = _check_variant(variant), _e4m3_max(variant)
    return next(c for c in range(0x80) if not _e4m3_is_nan(c, variant) and _e4m3_magnitude(c, bias) == top)


def _e4m3_nan_code(sign: int, variant: str, overflow: str) -> int:
    if variant == "fnuz":
        return 0x80
    return 0x7F if overflow == "satfinite" else 0x7F | (sign << 7)


def encode_e4m3(x_bits: int, variant: Fp8Variant = "fn", overflow: Fp8Overflow = "nan") -> int:
    """e4m3 code of a float32, round to nearest even in exact arithmetic.

    Overflow = the correctly rounded value with unbounded exponent exceeds max.
    overflow "nan": overflow, Inf and NaN -> 0x7F|sign (fn) / 0x80 (fnuz);
    "saturate": overflow and Inf -> +-max, NaN -> the NaN code (fn keeps the sign);
    "satfinite": overflow and Inf -> +-max, every NaN -> 0x7F (fn) / 0x80 (fnuz).
    A zero result keeps the sign in fn (0x80) and is 0x00 in fnuz (no -0).
    """
    _check_u32(x_bits, "x_bits")
    bias = _check_variant(variant)
    if overflow not in ("nan", "saturate", "satfinite"):
        raise ValueError(f"overflow must be 'nan', 'saturate' or 'satfinite', got {overflow!r}")
    sign = f32_sign(x_bits)
    if f32_is_nan(x_bits):
        return _e4m3_nan_code(sign, variant, overflow)
    max_code = _e4m3_code_of_max(_variant(variant)) | (sign << 7)
    if f32_is_inf(x_bits):
        return _e4m3_nan_code(sign, variant, overflow) if overflow == "nan" else max_code
    _, sig, exp = _f32_dyadic(x_bits)
    sig, q = round_dyadic_nearest_even(sig, exp, 4, 1 - bias)
    top = e4m3_max(variant)  # a dyadic value: its denominator is a power of two
    if dyadic_greater(sig, q, top.numerator, -(top.denominator.bit_length() - 1)):
        return _e4m3_nan_code(sign, variant, overflow) if overflow == "nan" else max_code
    if sig == 0:
        return (sign << 7) if variant == "fn" else 0x00
    if sig < 8:  # subnormal: q == emin - 3
        return (sign << 7) | sig
    field = q + 3 + bias  # sig * 2^q = (sig / 8) * 2^(q + 3)
    return (sign << 7) | (field << 3) | (sig - 8)


# ---------------------------------------------------------------------------------------------
# Blocks
# ---------------------------------------------------------------------------------------------


def block_amax_bits(x_bits: list[int], ignore_nan: bool = False) -> int:
    """float32 bits of max |x| over a block. A NaN makes it NaN (0x7FC00000), or with
    `ignore_nan` (max-num reductions) is skipped, so an all-NaN block has amax 0."""
    best = 0
    for b in x_bits:
        _check_u32(b, "x_bits")
        if f32_is_nan(b):
            if ignore_nan:
                continue
            return F32_CANONICAL_NAN
        # For non-NaN magnitudes the integer order of the bits is the numeric order.
        best = max(best, b & F32_ABS)
    return best


def quantize_mx_block(x_bits: list[int], profile: str | Profile, quotient: Quotient = "exact") -> tuple[list[int], int]:
    """One block: (E2M1 codes per element, e8m0 byte) under a profile."""
    ignore_nan = getattr(_get_profile(profile), "amax_nan", "propagate") == "ignore"
    byte = e8m0_scale(block_amax_bits(x_bits, ignore_nan), profile)
    return [encode_e2m1_scaled(b, byte, profile, quotient) for b in x_bits], byte


def quantize_mx_e4m3fn_block(x_bits: list[int], profile: str | Profile) -> tuple[list[int], int]:
    """One MXFP8 block: (e4m3fn codes per element, e8m0 byte) under a profile: the byte from the
    amax with E4M3FN's 448 and 2^8, each element divided by the scale in float32, then encoded
    saturating (beyond +-448 and +-Inf to +-448, NaN keeps its sign)."""
    ignore_nan = getattr(_get_profile(profile), "amax_nan", "propagate") == "ignore"
    byte = e8m0_scale(block_amax_bits(x_bits, ignore_nan), profile, E4M3FN)
    return [encode_e4m3(scaled_f32_bits(b, byte, profile), "fn", "saturate") for b in x_bits], byte


def pack_nibbles(codes: list[int]) -> list[int]:
    """Element 2i in the low nibble, 2i+1 in the high nibble of byte i."""
    if len(codes) % 2:
        raise ValueError(f"codes must have an even length, got {len(codes)}")
    return [(codes[i] & 0xF) | ((codes[i + 1] & 0xF) << 4) for i in range(0, len(codes), 2)]


def quantize_mx_row(
    x_bits: list[int], profile: str | Profile, group: int = 32, quotient: Quotient = "exact"
) -> tuple[list[int], list[int]]:
    """A row of N float32 (N a multiple of group) -> (packed bytes [N/2], e8m0 bytes [N/group])."""
    if group <= 0 or group % 2 or len(x_bits) % group:
        raise ValueError(f"row length {len(x_bits)} must be a multiple of an even group ({group})")
    codes: list[int] = []
    scales: list[int] = []
    for start in range(0, len(x_bits), group):
        block_codes, byte = quantize_mx_block(x_bits[start : start + group], profile, quotient)
        codes += block_codes
        scales.append(byte)
    return pack_nibbles(codes), scales


def _nan_runs(f, lo: int, hi: int) -> list[tuple[int, int, int]]:
    """Runs of equal codes over the NaN patterns lo..hi, split where the ends disagree (a NaN's
    code may depend on its payload), each run checked at seven inner points."""
    a, b = f(lo), f(hi)
    if a == b:
        for k in range(1, 8):
            u = lo + (hi - lo) * k // 8
            assert f(u) == a, f"NaN run {lo:#x}..{hi:#x} not constant at {u:#x}"
        return [(lo, hi, a)]
    mid = (lo + hi) // 2
    return _nan_runs(f, lo, mid) + _nan_runs(f, mid + 1, hi)


def code_runs(f, breaks) -> list[tuple[int, int, int]]:
    """The exact answers of ``f`` (float32 bits -> code) over all 2^32 patterns, as sorted runs
    (first, last, code): f is constant between consecutive rounding boundaries ``breaks``
    (positive float32 bits), which the run checks at both ends; each boundary is a run of its own."""
    runs = []
    for sign in (0, 0x80000000):
        runs.append((sign, sign, f(sign)))
        lo = sign | 1
        for b in sorted(breaks):
            b |= sign
            code = f(lo)
            assert f(b - 1) == code, f"exact not constant on {lo:#x}..{b - 1:#x}"
            runs += [(lo, b - 1, code), (b, b, f(b))]
            lo = b + 1
        top = sign | 0x7F7FFFFF
        assert f(lo) == f(top), f"exact not constant on {lo:#x}..{top:#x}"
        runs += [(lo, top, f(top)), (sign | 0x7F800000, sign | 0x7F800000, f(sign | 0x7F800000))]
        runs += _nan_runs(f, sign | 0x7F800001, sign | 0x7FFFFFFF)
    return sorted(runs)
