"""The exact model's integer (dyadic) paths against the textbook in Fractions, written here: the
quotient x / 2^(byte - 127) as a Fraction, rounded to float32 by divmod on its ulp when the
quotient is "f32", the nearest of the 8 E2M1 magnitudes by Fraction distance, the profile's tie
and zero-sign rules. Random (fixed seed), tie-targeted and special inputs, every distinct profile."""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np
import pytest

from mxgate.oracle import exact as X
from mxgate.oracle import profiles

F = Fraction
SEED = 0x5EED_D1AD
BYTES = [0, 1, 126, 127, 128, 254, 255]
E2M1_MAGNITUDES = [F(0), F(1, 2), F(1), F(3, 2), F(2), F(3), F(4), F(6)]  # OCP MX v1.0, table 5
SPECIALS = [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000, 0x7F7FFFFF,
            0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF,
            0xFFFFFFFF, 0x3F800000, 0x40C00000, 0x40A00000, 0x40E00000]
# The fields encode_e2m1_scaled, encode_e2m1 and scaled_f32_bits read (bytes 1..254 not the last two):
# profiles that agree on them agree on every output, so one of each kind covers every profile name.
READS = ("tie", "zero_sign", "nan", "inf", "nan_scale", "scale0_divisor")
READS_PLAIN_BYTE = READS[:4]
DIVISOR0 = {"pow2": F(1, 2**127), "min_normal": F(1, 2**126), "one": F(1)}


def distinct_profiles(reads: tuple[str, ...]) -> list[profiles.Profile]:
    kinds: dict[tuple, profiles.Profile] = {}
    for name in profiles.names():
        p = profiles.get(name)
        kinds.setdefault(tuple(getattr(p, f) for f in reads), p)
    return list(kinds.values())


@functools.cache
def decode(bits: int) -> Fraction:
    """A finite float32 from its fields."""
    sign = -1 if bits >> 31 else 1
    field, mant = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    if field == 0:
        return sign * F(mant, 2**149)
    return sign * F(2**23 + mant) * F(2) ** (field - 150)


def round_f32(q: Fraction) -> Fraction | None:
    """The float32 nearest to q, ties to even (None past the range: +-Inf)."""
    a = abs(q)
    if a == 0:
        return F(0)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if F(2) ** e > a:
        e -= 1
    ulp = F(2) ** (max(e, -126) - 23)
    n, r = divmod(a, ulp)
    if 2 * r > ulp or (2 * r == ulp and n % 2):
        n += 1
    if n * ulp >= 2**128:
        return None
    return n * ulp if q > 0 else -n * ulp


def nearest(x: Fraction) -> tuple[tuple[int, ...], bool]:
    """The codes of the E2M1 magnitudes nearest to |x| (two on a tie), and x < 0."""
    dist = [abs(abs(x) - m) for m in E2M1_MAGNITUDES]
    best = min(dist)
    return tuple(i for i in range(8) if dist[i] == best), x < 0


def apply_rules(near: tuple[int, ...], negative: bool, sign_bit: int, p: profiles.Profile) -> int:
    """The tie rule between two nearest codes (even: the even code, mantissa bit 0), then the sign."""
    i = near[0]
    if len(near) == 2:
        lo, hi = near
        tie = p.tie
        if tie == "even":
            i = lo if lo % 2 == 0 else hi
        elif tie == "away" or (tie == "down" and negative):
            i = hi
        else:
            assert tie in ("zero", "down")
            i = lo
    if i:
        return i | (sign_bit << 3)
    if p.zero_sign == "keep":
        return sign_bit << 3
    if p.zero_sign == "if_negative":
        return 0x8 if negative else 0x0
    assert p.zero_sign == "clear"
    return 0x0


def divisor(byte: int, scale0: str) -> Fraction:
    return DIVISOR0[scale0] if byte == 0 else F(2) ** (byte - 127)


@functools.cache
def outcome(bits: int, byte: int, scale0: str, nan_scale: str, quotient: str) -> tuple:
    """What the profile rules act on: ("nan", bits of the NaN), ("inf",) or ("near", codes, x < 0)."""
    if X.f32_is_nan(bits):
        return "nan", bits | X.F32_QUIET
    if byte == 255 and nan_scale == "nan":
        return "nan", X.F32_CANONICAL_NAN
    if byte == 255 and nan_scale == "inf":
        return ("nan", X.F32_X86_DEFAULT_NAN) if X.f32_is_inf(bits) else ("near", *nearest(F(0)))
    if X.f32_is_inf(bits):
        return ("inf",)
    q = decode(bits) / divisor(byte, scale0)
    if quotient == "f32":
        q = round_f32(q)
        if q is None:
            return ("inf",)
    return ("near", *nearest(q))


def want_scaled(bits: int, byte: int, p: profiles.Profile, quotient: str) -> int:
    # The NaN and Inf codes come from the model's own rule tables: the arithmetic is under test.
    o = outcome(bits, byte, p.scale0_divisor if byte == 0 else "", p.nan_scale if byte == 255 else "", quotient)
    if o[0] == "nan":
        return X._e2m1_nan_code(o[1], p)
    if o[0] == "inf":
        return X._e2m1_inf_code(bits >> 31, p)
    return apply_rules(o[1], o[2], bits >> 31, p)


@functools.cache
def want_scaled_f32(bits: int, byte: int, scale0: str) -> Fraction | None:
    """The float32 quotient's value, None for +-Inf (of x's sign)."""
    return round_f32(decode(bits) / divisor(byte, scale0))


def inputs() -> list[int]:
    rng = np.random.default_rng(SEED)
    uniform = rng.integers(0, 1 << 32, 300, dtype=np.uint64)
    field = rng.integers(0, 255, 500, dtype=np.uint64)
    mant = rng.integers(0, 1 << 23, 500, dtype=np.uint64)
    mant &= ~((np.uint64(1) << rng.integers(0, 24, 500, dtype=np.uint64)) - np.uint64(1))  # zeros below: ties
    sign = rng.integers(0, 2, 500, dtype=np.uint64) << np.uint64(31)
    xs = [int(b) for b in uniform] + [int(b) for b in sign | (field << np.uint64(23)) | mant] + SPECIALS
    # Every multiple of 1/4 up to 7 (the E2M1 grid, its midpoints, past 6) times each divisor
    # (byte 255: 2^128), where float32 holds it, one ulp either side, both signs.
    points = {m * F(2) ** (b - 127) for m in [F(k, 4) for k in range(1, 29)] for b in BYTES[1:]}
    points |= {m * d for m in [F(k, 4) for k in range(1, 29)] for d in DIVISOR0.values()}
    for v in sorted(points):
        b = X.fraction_to_f32_bits(v)
        if decode(b) == v:
            xs += [b - 1, b, b + 1, (b - 1) | X.F32_SIGN, b | X.F32_SIGN, (b + 1) | X.F32_SIGN]
    return sorted(set(xs))


XS = inputs()
PROFILES = distinct_profiles(READS)
PLAIN_BYTE_PROFILES = distinct_profiles(READS_PLAIN_BYTE)


def test_inputs_hit_ties_in_every_byte() -> None:
    for byte in BYTES[1:-1]:
        ties = sum(len(o[1]) == 2 for o in (outcome(b, byte, "", "", "exact") for b in XS) if o[0] == "near")
        assert ties >= 8, byte  # the grid's midpoints that float32 holds at this scale, both signs
    assert len(XS) > 1000 and len(PROFILES) > 10


@pytest.mark.parametrize("quotient", ["exact", "f32"])
def test_scaled_e2m1_against_fractions(quotient: str) -> None:
    for byte in BYTES:
        for p in PROFILES if byte in (0, 255) else PLAIN_BYTE_PROFILES:
            got = [X.encode_e2m1_scaled(b, byte, p, quotient) for b in XS]
            want = [want_scaled(b, byte, p, quotient) for b in XS]
            bad = [(hex(b), g, w) for b, g, w in zip(XS, got, want) if g != w]
            assert not bad, (p.name, byte, bad[:5])


def test_encode_e2m1_and_value_against_fractions() -> None:
    rng = np.random.default_rng(SEED + 1)
    odd = [F(int(n), int(d)) for n, d in zip(rng.integers(-200, 200, 300), rng.integers(1, 60, 300))]
    for p in PROFILES:
        for b in XS:
            if X.f32_is_finite(b):
                assert X.encode_e2m1(b, p) == want_scaled(b, 127, p, "exact"), (p.name, hex(b))
        for x in odd:  # non-dyadic values through the integer rule's general form
            got = X._encode_e2m1_halves(2 * abs(x.numerator), x.denominator, x < 0, int(x < 0), p)
            assert got == apply_rules(*nearest(x), int(x < 0), p), (p.name, x)


def test_scaled_f32_bits_against_fractions() -> None:
    for p in PROFILES:
        for byte in BYTES if p.nan_scale == "exponent" else BYTES[:-1]:  # 255 taken literally: 2^128
            if byte not in (0, 255) and p not in PLAIN_BYTE_PROFILES:
                continue
            for b in XS:
                if not X.f32_is_finite(b):
                    continue
                got = X.scaled_f32_bits(b, byte, p)
                value = want_scaled_f32(b, byte, p.scale0_divisor if byte == 0 else "")
                assert got >> 31 == b >> 31, (p.name, byte, hex(b))
                if value is None:
                    assert got & X.F32_ABS == X.F32_INF, (p.name, byte, hex(b))
                else:
                    assert X.f32_is_finite(got) and decode(got) == value, (p.name, byte, hex(b))


def test_f32_fraction_round_trips() -> None:
    rng = np.random.default_rng(SEED + 2)
    for b in XS:
        if X.f32_is_finite(b):
            assert X.f32_to_fraction(b) == decode(b)
            assert X.fraction_to_f32_bits(decode(b), negative_zero=bool(b >> 31)) == b
    nums = [int(n) for n in rng.integers(-(1 << 40), 1 << 40, 400)]
    dens = [int(d) for d in rng.integers(1, 1 << 20, 400)] + [1 << int(k) for k in rng.integers(0, 200, 400)]
    for n, d in zip(nums * 2, dens):
        x = F(n, d) * F(2) ** int(rng.integers(-160, 100))
        r = round_f32(x)
        got = X.fraction_to_f32_bits(x)
        if r is None:
            assert got & X.F32_ABS == X.F32_INF and got >> 31 == (x < 0)
        else:
            assert decode(got) == r and got >> 31 == (x < 0)  # a zero keeps x's sign
