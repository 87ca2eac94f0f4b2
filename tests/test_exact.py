"""The exact (slow, independent) model against hand-checkable facts from docs/spec.md.

Every expectation here is a literal worked out from the format definitions, not a value the
model computed; the fast oracle is checked against this model in test_oracle_vs_exact.py.
"""

from __future__ import annotations

import math
import struct
from dataclasses import replace
from fractions import Fraction

import pytest
from numpy.random import PCG64, Generator

from mxgate.oracle import exact as X
from mxgate.oracle import profiles

F = Fraction
GFX950 = profiles.get("gfx950")


def bits(value: float) -> int:
    """float32 bits of a Python float that float32 holds exactly (checked)."""
    packed = struct.unpack("<I", struct.pack("<f", value))[0]
    assert struct.unpack("<f", struct.pack("<I", packed))[0] == value or math.isnan(value)
    return packed


def with_rules(**fields: object) -> profiles.Profile:
    return replace(GFX950, name="synthetic", **fields)


# --------------------------------------------------------------------------------- float32 / bf16


def test_float32_decode_specials_and_extremes() -> None:
    assert X.f32_to_fraction(0x00000001) == F(1, 2**149)
    assert X.f32_to_fraction(0x007FFFFF) == F(2**23 - 1, 2**149)
    assert X.f32_to_fraction(0x00800000) == F(1, 2**126)
    assert X.f32_to_fraction(0x7F7FFFFF) == (2**24 - 1) * F(2**104)
    assert X.f32_to_fraction(0x80000000) == 0
    assert X.f32_to_fraction(0xBF800000) == -1
    assert X.f32_decode(0x7F800000) == "inf" and X.f32_decode(0xFF800000) == "inf"
    assert X.f32_decode(0x7F800001) == "nan" and X.f32_decode(0xFFC00000) == "nan"
    with pytest.raises(ValueError):
        X.f32_to_fraction(0x7FC00000)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (F(1, 6), 0x3E2AAAAB),
        (F(1, 448), 0x3B124925),
        (F(1, 240), 0x3B888889),
        (F(1) + F(1, 2**24), 0x3F800000),  # tie, even stays down
        (F(1) + F(3, 2**24), 0x3F800002),  # tie, odd rounds up
        (F(1, 2**150), 0x00000000),  # half the smallest subnormal: tie to even 0
        (F(3, 2**151), 0x00000001),  # 0.75 of the smallest subnormal
        (F(2**24 - 1, 2**150), 0x00800000),  # rounds up into the smallest normal
        ((2**25 - 1) * F(2**103), 0x7F800000),  # max + half ulp: tie to even 2^128 -> Inf
        ((2**25 - 2) * F(2**103), 0x7F7FFFFF),
        (F(-1, 2**151), 0x80000000),  # negative underflow keeps its sign
    ],
)
def test_fraction_to_float32_rounds_to_nearest_even(value: Fraction, expected: int) -> None:
    assert X.fraction_to_f32_bits(value) == expected


def test_float_helpers() -> None:
    assert X.f32_bits(1 / 6) == 0x3E2AAAAB
    assert X.f32_bits(1e-10) == 0x2EDBE6FF
    assert X.f32_bits(1e-4) == 0x38D1B717
    assert X.f32_bits(-0.0) == 0x80000000
    assert X.f32_bits(float("inf")) == 0x7F800000
    assert X.f32_bits(float("nan")) == 0x7FC00000
    assert X.f32_bits(6.0 * 2.0**-126) == 0x01C00000


def test_two_rounding_cores_agree() -> None:
    rng = Generator(PCG64(20240611))
    for _ in range(2000):
        sig = int(rng.integers(0, 2**40))
        exp = int(rng.integers(-200, 60))
        precision = int(rng.integers(2, 25))
        emin = int(rng.integers(-150, 0))
        exact = X.round_nearest_even(sig * X.pow2(exp), precision, emin)
        assert X.round_dyadic_nearest_even(sig, exp, precision, emin) == exact


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (0x3F808000, 0x3F80),  # 1 + 2^-8: tie, stays even
        (0x3F818000, 0x3F82),  # 1 + 3*2^-8: tie, rounds to even
        (0x3F808001, 0x3F81),
        (0x7F7F7FFF, 0x7F7F),
        (0x7F7F8000, 0x7F80),  # tie at the top: even neighbour is 2^128 -> Inf
        (0xFF7FFFFF, 0xFF80),
        (0x00008000, 0x0000),  # subnormal tie to even zero
        (0x00018000, 0x0002),
        (0x80000001, 0x8000),
        (0x7F800001, 0x7FC0),  # signalling NaN stays NaN, quieted
        (0xFFC12345, 0xFFC0),
        (0x7F800000, 0x7F80),
    ],
)
def test_round_bf16(x: int, expected: int) -> None:
    assert X.round_bf16(x) == expected
    assert X.round_bf16(x, "torch-cpu") == (0xFFFF if X.f32_is_nan(x) else expected)
    assert X.round_bf16(x, "torch-cuda") == (0x7FFF if X.f32_is_nan(x) else expected)


# ------------------------------------------------------------------------------------------ E2M1

E2M1_VALUES = [0, 0.5, 1, 1.5, 2, 3, 4, 6]


def test_decode_all_16_e2m1_codes() -> None:
    for code in range(16):
        sign = -1 if code & 8 else 1
        assert X.decode_e2m1(code) == sign * F(E2M1_VALUES[code & 7])
    assert X.decode_e2m1_f32_bits(0x8) == 0x80000000
    assert X.decode_e2m1_f32_bits(0x0) == 0x00000000
    assert X.decode_e2m1_f32_bits(0xF) == 0xC0C00000
    with pytest.raises(ValueError):
        X.decode_e2m1(16)


# midpoint -> (lower code, upper code, even choice)
MIDPOINTS = {
    0.25: (0, 1, 0),
    0.75: (1, 2, 2),
    1.25: (2, 3, 2),
    1.75: (3, 4, 4),
    2.5: (4, 5, 4),
    3.5: (5, 6, 6),
    5.0: (6, 7, 6),
}


def tie_choice(tie: str, lo: int, hi: int, even: int, negative: bool) -> int:
    return {"even": even, "zero": lo, "away": hi, "down": hi if negative else lo}[tie]


@pytest.mark.parametrize("tie", ["even", "zero", "away", "down"])
@pytest.mark.parametrize("midpoint", sorted(MIDPOINTS))
@pytest.mark.parametrize("negative", [False, True])
def test_e2m1_midpoints_and_neighbours(tie: str, midpoint: float, negative: bool) -> None:
    p = with_rules(tie=tie, zero_sign="keep")
    lo, hi, even = MIDPOINTS[midpoint]
    sign = 0x8 if negative else 0x0
    m = bits(-midpoint if negative else midpoint)
    assert X.encode_e2m1(m, p) == tie_choice(tie, lo, hi, even, negative) | sign
    assert X.encode_e2m1(m - 1, p) == lo | sign  # one float32 ulp nearer zero
    assert X.encode_e2m1(m + 1, p) == hi | sign


def test_e2m1_named_profiles_ties_match_spec() -> None:
    # SPEC 2: argmin goes to the lower value; threshold toward zero; microxcaling away.
    def enc(v: float, name: str) -> int:
        return X.encode_e2m1(bits(v), name)

    assert [enc(v, "argmin") for v in (0.75, 1.75, 3.5, 5.0)] == [1, 3, 5, 6]
    assert [enc(v, "argmin") for v in (-0.25, -1.25, -5.0)] == [0x9, 0xB, 0xF]
    assert [enc(v, "threshold") for v in (0.25, -0.25, 2.5, 5.0, -5.0)] == [0, 0, 4, 6, 0xE]
    assert [enc(v, "microxcaling") for v in (2.5, 5.0, 0.25, -0.25)] == [5, 7, 1, 0x9]
    assert [enc(v, "gfx950") for v in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)] == [0, 2, 2, 4, 4, 6, 6]


def test_e2m1_saturation() -> None:
    for name in ("gfx950", "argmin", "threshold", "microxcaling"):
        assert X.encode_e2m1(bits(6.0), name) == 0x7
        assert X.encode_e2m1(bits(7.0), name) == 0x7
        assert X.encode_e2m1(0x7F7FFFFF, name) == 0x7
        assert X.encode_e2m1(0xFF7FFFFF, name) == 0xF


@pytest.mark.parametrize(
    ("rule", "neg_zero", "neg_small", "neg_quarter_even"),
    [("keep", 0x8, 0x8, 0x8), ("if_negative", 0x0, 0x8, 0x8), ("clear", 0x0, 0x0, 0x0)],
)
def test_e2m1_sign_of_zero(rule: str, neg_zero: int, neg_small: int, neg_quarter_even: int) -> None:
    p = with_rules(zero_sign=rule)
    assert X.encode_e2m1(0x80000000, p) == neg_zero
    assert X.encode_e2m1(X.f32_bits(-0.1), p) == neg_small
    assert X.encode_e2m1(0x80000001, p) == neg_small
    assert X.encode_e2m1(bits(-0.25), p) == neg_quarter_even
    assert X.encode_e2m1(0x00000000, p) == 0x0


@pytest.mark.parametrize(
    ("name", "pos_nan", "neg_nan", "pos_inf", "neg_inf"),
    [
        ("gfx950", 0x7, 0xF, 0x7, 0xF),
        ("aiter-py", 0x3, 0xB, 0x7, 0xF),
        ("aiter-gfx942", 0x0, 0x0, 0x7, 0xF),
        ("argmin", 0xF, 0xF, 0xF, 0xF),
        ("threshold", 0x7, 0x7, 0x7, 0xF),
        ("cuda-satfinite", 0x7, 0x7, 0x7, 0xF),
        ("ml_dtypes", 0x8, 0x0, 0x7, 0xF),
    ],
)
def test_e2m1_nan_and_inf(name: str, pos_nan: int, neg_nan: int, pos_inf: int, neg_inf: int) -> None:
    assert X.encode_e2m1(0x7FC00000, name) == pos_nan
    assert X.encode_e2m1(0xFFC00000, name) == neg_nan
    assert X.encode_e2m1(0x7F800000, name) == pos_inf
    assert X.encode_e2m1(0xFF800000, name) == neg_inf


@pytest.mark.parametrize(
    ("nan_bits", "expected"),
    [
        # torchao's int path: ((|b| + 0xC11FFFFF + b22) mod 2^32) >> 22, as uint8, | sign << 3
        (0x7FC00000, 0x3),
        (0xFFC00000, 0xB),
        (0x7F800001, 0x2),  # signalling, bit 22 clear: 0x40A00000 >> 22 = 0x102
        (0x7F9FFFFF, 0x2),
        (0x7FA00000, 0x2),  # the torchao path's own tie: stays even
        (0x7FA00001, 0x3),
        (0x7FDFFFFF, 0x3),
        (0x7FE00000, 0x4),
        (0x7FFFFFFF, 0x4),
        (0xFFFFFFFF, 0xC),
    ],
)
def test_torchao_nan_codes(nan_bits: int, expected: int) -> None:
    assert X.encode_e2m1(nan_bits, "aiter-py") == expected


def test_scaled_encode_divides_exactly() -> None:
    # 3 * 2^-10 with scale 2^-10 (byte 117) is exactly 3 -> code 5; 5 * 2^20 at byte 147 is a tie.
    assert X.encode_e2m1_scaled(bits(3 * 2.0**-10), 117, "gfx950") == 0x5
    assert X.encode_e2m1_scaled(bits(5 * 2.0**20), 147, "gfx950") == 0x6
    assert X.encode_e2m1_scaled(bits(5 * 2.0**20), 147, "microxcaling") == 0x7
    assert X.encode_e2m1_scaled(bits(-2.0**-140), 0, "gfx950") == 0x8  # -2^-13: zero, sign kept
    assert X.encode_e2m1_scaled(bits(1.0), 0, "argmin") == 0x7  # 2^127 saturates, no Inf step
    # A signalling NaN comes out of the division quiet: 0x7FC00001 -> code 3.
    assert X.encode_e2m1_scaled(0x7F800001, 127, "aiter-py") == 0x3
    assert X.encode_e2m1_scaled(0x7F800001, 255, "gfx950") == 0x7


@pytest.mark.parametrize(
    ("x", "byte", "name", "exact", "f32"),
    [
        # The two quotient models differ only where a float32 quotient leaves the finite range
        # (and the profile treats Inf or a signed zero specially) or the scale is byte 255.
        (0x40000000, 0, "argmin", 0x7, 0xF),  # 2 * 2^127 overflows float32: Inf -> neg_max
        (0x40000000, 0, "gfx950", 0x7, 0x7),
        (0x80010000, 200, "aiter-gfx942", 0x8, 0x0),  # underflows to -0.0: not x < 0
        (0x80010000, 200, "gfx950", 0x8, 0x8),
        # Byte 255 follows profile.nan_scale in both models: 2^128 (gfx950) or a NaN scale.
        (0xBF800000, 255, "gfx950", 0x8, 0x8),
        (0xBF800000, 255, "aiter-py", 0x3, 0x3),  # -1 / NaN is the scale's +NaN
        (0xFFC00000, 255, "ml_dtypes", 0x0, 0x0),  # a NaN dividend stays itself: -NaN -> 0x0
        (0x7F800000, 255, "gfx950", 0x7, 0x7),
        (0x3F800000, 127, "argmin", 0x2, 0x2),
    ],
)
def test_scaled_quotient_models(x: int, byte: int, name: str, exact: int, f32: int) -> None:
    assert X.encode_e2m1_scaled(x, byte, name) == exact
    assert X.encode_e2m1_scaled(x, byte, name, quotient="f32") == f32


# ------------------------------------------------------------------------------------------ E8M0


@pytest.mark.parametrize(
    ("byte", "pow2", "zero_inf"),
    [
        (0, F(1, 2**127), F(0)),
        (1, F(1, 2**126), F(1, 2**126)),
        (127, F(1), F(1)),
        (254, F(2**127), F(2**127)),
        (255, "nan", "inf"),
    ],
)
def test_decode_e8m0(byte: int, pow2: object, zero_inf: object) -> None:
    assert X.decode_e8m0(byte, "gfx950") == pow2
    assert X.decode_e8m0(byte, with_rules(byte0="zero", byte255="inf")) == zero_inf


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gfx950", 1),  # SPEC 3.3: AITER indexer floor 6*2^-126, * fl(1/6): a zero group gives E = 1
        ("aiter-per1x32", 92),  # SPEC 3.3: floor 1e-10 -> E = 92
        ("threshold", 114),  # max(0/6, fl(1e-4)) -> ceil_pow2 2^-13
        ("deepgemm", 112),  # fl(1e-4) / 6 = 1.67e-5 -> 2^-15
        ("argmin", 98),  # 1e-8 / 6 = 1.67e-9 -> ceil(log2) = -29
        ("ml_dtypes", 0),  # v = 0: exponent field 0
        ("ocp", 0),  # floor_log2(0) = -inf, lowest byte
    ],
)
def test_zero_group_scale(name: str, expected: int) -> None:
    assert X.e8m0_scale(0x00000000, name) == expected
    assert X.e8m0_scale(0x80000000, name) == expected


def test_rceil_examples() -> None:
    # 6 * fl(1/6) = 1 + 2^-25 rounds to 1.0: byte 127; one ulp more gives 2.
    assert X.e8m0_scale(bits(6.0), "gfx950") == 127
    assert X.e8m0_scale(bits(6.0) + 1, "gfx950") == 128
    assert X.e8m0_scale(bits(6.0), "deepgemm") == 127
    assert X.e8m0_scale(bits(12.0), "gfx950") == 128
    assert X.e8m0_scale(bits(3.0), "gfx950") == 126
    assert X.e8m0_scale(0x7F7FFFFF, "gfx950") == 253  # 5.67e37 -> 2^126
    assert X.e8m0_scale(0x00800000, "ml_dtypes") == 1  # v = 2^-126 / 6 is subnormal: field 1
    assert X.e8m0_scale(0x00000001, "ml_dtypes") == 0  # v = 2^-149 / 6 rounds to 0
    for special in (0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001):
        assert X.e8m0_scale(special, "gfx950") == 0xFF
        assert X.e8m0_scale(special, "deepgemm") == 254  # clamped: DeepGEMM's ceil_to_ue8m0 field 0xFF -> [1, 254]
        assert X.e8m0_scale(special, "threshold") == 254  # clamped: field 0xFF -> [1, 254]


def test_rceil_log2f_versus_bitwise() -> None:
    # amax = 6 * 2^4 * (1 + 2^-23) / ... : pick v directly through 'divide' with amax = 6 v.
    v = bits(16.0) + 1  # 16 (1 + 2^-23): fl32(log2 v) == 4 exactly, bitwise ceil gives 5
    assert X.ceil_log2f(v) == 4
    assert X.ceil_pow2_field(v) == 127 + 5


def test_other_policies() -> None:
    floor = with_rules(scale_policy="floor", amax_floor=None)
    ceil = with_rules(scale_policy="ceil", amax_floor=None)
    even = with_rules(scale_policy="even", amax_floor=None)
    assert [X.e8m0_scale(X.f32_bits(v), floor) for v in (6.0, 7.99, 8.0, 1.0, 2.0**-125)] == [127, 127, 128, 125, 0]
    assert [X.e8m0_scale(X.f32_bits(v), ceil) for v in (4.0, 4.0000005, 6.0, 1.0)] == [127, 128, 128, 125]
    assert [X.e8m0_scale(X.f32_bits(v), even) for v in (1.75, 1.7499999, 6.0, 8.0, 7.0)] == [126, 125, 127, 128, 128]
    assert X.e8m0_scale(0x7F700000, even) == 0xFF  # mantissa rounds up into the Inf pattern
    assert X.e8m0_scale(0x00000000, even) == 0


def test_exp_clamp() -> None:
    assert X.e8m0_scale(0x00000000, with_rules(amax_floor=None, exp_clamp=(1, 254))) == 1
    assert X.e8m0_scale(0x7F7FFFFF, with_rules(exp_clamp=(1, 200))) == 200


def test_reciprocal_never_changes_rceil_near_powers_of_two() -> None:
    # SPEC 3: amax * fl(1/6) versus amax / 6 never changes the RCEIL exponent.
    recip = with_rules(amax_floor=None)
    divide = with_rules(amax_floor=None, scale_arithmetic="divide")
    for k in range(-126, 126):
        centre = X.fraction_to_f32_bits(6 * X.pow2(k))
        for u in range(centre - 3, centre + 4):
            assert X.e8m0_scale(u, recip) == X.e8m0_scale(u, divide), hex(u)


# --------------------------------------------------------------------------------------- log2f


def test_log2f_affected_counts() -> None:
    counts = X.log2f_affected_counts()
    normal = sum(n for k, n in counts.items() if k >= -126)
    subnormal = sum(n for k, n in counts.items() if k < -126)
    assert (normal, subnormal) == (3676, 24)
    assert normal + subnormal == 3700  # SPEC section 4's total includes the subnormals
    assert all(counts[k] == 0 for k in range(-4, 4))  # none in [1/16, 16)
    # SPEC 4.2: j <= 1 for |k| in [4, 8), j <= 2 for [8, 16), j <= 5 for [16, 32), up to 22.
    assert {counts[k] for k in range(4, 8)} == {1} and {counts[-k] for k in range(5, 9)} == {1}
    assert {counts[k] for k in range(8, 16)} == {2}
    assert {counts[k] for k in range(16, 32)} == {5}
    assert {counts[k] for k in range(64, 128)} == {22}
    assert [counts[k] for k in range(-131, -126)] == [1, 2, 5, 5, 11]
    assert max(counts.values()) == 22


@pytest.mark.parametrize("k", [-126, -100, -64, -9, -5, 0, 4, 15, 31, 100, 127])
def test_log2f_threshold_is_a_clean_step(k: int) -> None:
    j = X.log2f_threshold(k)
    base = X.binade_base_bits(k)
    assert X.ceil_log2f(base) == k
    assert all(X.ceil_log2f(base + i) == k for i in range(1, j + 1))
    assert all(X.ceil_log2f(base + i) == k + 1 for i in range(j + 1, j + 4))
    assert X.log2f_affected_mantissas(k) == list(range(1, j + 1))


def test_log2f_ceil_and_floor_skip_the_logarithm_only_where_it_cannot_matter() -> None:
    """ceil and floor of fl32(log2 s) are decided without the logarithm once s lies 2^-16
    (relative) or more from a power of two: on every binade, the float32 on both sides of the
    ceil's edge 2^k (1 + 2^-16) and of the floor's edge 2^(k+1) (1 - 2^-16), and a few next to
    the powers, give the same integers as the correctly rounded log2f; and the quotients s / 6
    the rceil policies take, likewise."""
    checked = 0
    for k in range(-149, 128):
        base, size = X.binade_base_bits(k), X.binade_size(k)
        edge = max(1, size >> X._NEAR_POW2)  # 2^-16 of 2^k, in float32 steps of the binade
        ceil_edge, floor_edge = edge, size - 2 * edge  # 2^-16 of 2^(k+1) is two such steps
        steps = {1, 2, 3, size - 2, size - 1} | {e + d for e in (ceil_edge, floor_edge) for d in (-2, -1, 0, 1, 2)}
        for j in sorted(j for j in steps if 0 < j < size):
            s = X.f32_to_fraction(base + j)
            for v in (s, s / 6):
                log2f = X.log2f_value(v)
                assert X._ceil_log2f(v) == math.ceil(log2f), (hex(base + j), v == s)
                assert X._floor_log2f(v) == math.floor(log2f), (hex(base + j), v == s)
                checked += 1
    assert checked > 5000


@pytest.mark.parametrize(
    ("s", "log2f", "bitwise"),
    [
        (0x41800001, 0x41800000, 0x42000000),  # 16 (1 + 2^-23): log2f keeps 16, bitwise gives 32
        (0x41800006, 0x42000000, 0x42000000),  # past J(4) = 1: both 32
        (0x3F800000, 0x3F800000, 0x3F800000),
        (0x7F7FFFFF, 0x7F800000, 0x7F800000),  # log2 rounds to 128: 2^128 is +Inf
        (0x00000001, 0x00000001, 0x00800000),  # subnormal: bitwise ceil gives 2^-126
    ],
)
def test_ue8m0_round(s: int, log2f: int, bitwise: int) -> None:
    assert X.ue8m0_round(s, "log2f") == log2f
    assert X.ue8m0_round(s, "bitwise") == bitwise


def test_fp8_token_scale() -> None:
    # fl(1/448) = 0x3B124925 = 9586981 * 2^-32 and 448 * 9586981 = 2^32 + 192, so 448 * fl(1/448)
    # = 1 + 1.5 * 2^-25, which rounds to 1.0; the true division gives 1.0 as well.
    assert X.fp8_token_scale(X.f32_bits(448.0), 448, "divide", 1e-4) == 0x3F800000
    assert X.fp8_token_scale(X.f32_bits(448.0), 448, "divide", 1e-4, "ue8m0") == 0x3F800000
    assert X.fp8_token_scale(0, 448, "divide", 1e-4) == X.fraction_to_f32_bits(X.fl32_of_float(1e-4) / 448)
    assert X.fp8_token_scale(0x7FC00000, 448, "reciprocal", 1e-10) == 0x7FC00000
    assert X.fp8_token_scale(X.f32_bits(448.0), 448, "reciprocal", 1e-10) == 0x3F800000
    assert X.fl32_one_over(448) == X.f32_to_fraction(0x3B124925)
    assert X.fl32_one_over(240) == X.f32_to_fraction(0x3B888889)


def test_log2f_values() -> None:
    assert X.log2f_bits(0x3F800000) == 0x00000000
    assert X.log2f_bits(0x00000001) == X.f32_bits(-149.0)
    assert X.log2f_bits(bits(8.0)) == bits(3.0)
    # log2(10) = 3.32192809488736..., float32 nearest 0x40549A78
    assert X.log2f_bits(bits(10.0)) == 0x40549A78
    assert X.ceil_log2f(X.f32_bits(0.1)) == -3
    with pytest.raises(ValueError):
        X.ceil_log2f(0)


# ------------------------------------------------------------------------------------------ E4M3


def test_e4m3_decode_code_space() -> None:
    fn = [X.decode_e4m3(c, "fn") for c in range(256)]
    fnuz = [X.decode_e4m3(c, "fnuz") for c in range(256)]
    assert [c for c in range(256) if fn[c] == "nan"] == [0x7F, 0xFF]
    assert [c for c in range(256) if fnuz[c] == "nan"] == [0x80]
    assert fn[0x7E] == 448 and fn[0xFE] == -448 and X.e4m3_max("fn") == 448
    assert fnuz[0x7F] == 240 and fnuz[0xFF] == -240 and X.e4m3_max("fnuz") == 240
    assert fn[0x01] == F(1, 2**9) and fnuz[0x01] == F(1, 2**10)
    assert fn[0x08] == F(1, 2**6) and fnuz[0x08] == F(1, 2**7)
    assert fn[0x38] == 1 and fnuz[0x40] == 1
    assert X.decode_e4m3_f32_bits(0x80, "fn") == 0x80000000
    assert len({v for v in fn if v != "nan"}) == 253  # +-0 collapse
    assert len({v for v in fnuz if v != "nan"}) == 255


@pytest.mark.parametrize(
    ("value", "variant", "overflow", "expected"),
    [
        (448.0, "fn", "nan", 0x7E),
        (464.0, "fn", "nan", 0x7E),  # tie between 448 (even) and 480
        (464.00003, "fn", "nan", 0x7F),
        (-464.00003, "fn", "nan", 0xFF),
        (464.00003, "fn", "saturate", 0x7E),
        (-1e9, "fn", "satfinite", 0xFE),
        (240.0, "fnuz", "nan", 0x7F),
        (247.99998, "fnuz", "nan", 0x7F),
        (248.0, "fnuz", "nan", 0x80),  # tie between 240 (odd) and 256: overflow
        (-248.0, "fnuz", "saturate", 0xFF),
        (2.0**-10, "fn", "nan", 0x00),  # tie with 2^-9: even zero
        (-(2.0**-10), "fn", "nan", 0x80),  # negative zero kept in fn
        (-(2.0**-11), "fnuz", "nan", 0x00),  # no -0 in fnuz
        (3 * 2.0**-10, "fn", "nan", 0x02),  # tie 1 vs 2 subnormal steps: even 2
        (2.0**-11 * 1.0001, "fnuz", "nan", 0x01),
        (1.0625, "fn", "nan", 0x38),  # tie 1 vs 1.125: even 1.0
        (1.0625001, "fn", "nan", 0x39),  # BUGS #10: an fp16 intermediate would give 1.0
        (4.25, "fn", "nan", 0x48),  # ml_dtypes#221: 4.25 -> 4
    ],
)
def test_encode_e4m3_literals(value: float, variant: str, overflow: str, expected: int) -> None:
    assert X.encode_e4m3(X.f32_bits(value), variant, overflow) == expected


@pytest.mark.parametrize(
    ("x", "fn_nan", "fn_sat", "fn_satfinite", "fnuz_any"),
    [
        (0x7F800000, 0x7F, 0x7E, 0x7E, None),
        (0xFF800000, 0xFF, 0xFE, 0xFE, None),
        (0x7FC00000, 0x7F, 0x7F, 0x7F, 0x80),
        (0xFFC00000, 0xFF, 0xFF, 0x7F, 0x80),
    ],
)
def test_encode_e4m3_specials(x: int, fn_nan: int, fn_sat: int, fn_satfinite: int, fnuz_any: int | None) -> None:
    assert X.encode_e4m3(x, "fn", "nan") == fn_nan
    assert X.encode_e4m3(x, "fn", "saturate") == fn_sat
    assert X.encode_e4m3(x, "fn", "satfinite") == fn_satfinite
    if fnuz_any is not None:
        assert {X.encode_e4m3(x, "fnuz", o) for o in ("nan", "saturate", "satfinite")} == {fnuz_any}
    else:
        assert X.encode_e4m3(x, "fnuz", "nan") == 0x80
        assert X.encode_e4m3(x, "fnuz", "saturate") == (0xFF if x >> 31 else 0x7F)


def test_e4m3_roundtrip_every_code() -> None:
    for variant in ("fn", "fnuz"):
        for code in range(256):
            f = X.decode_e4m3_f32_bits(code, variant)
            if X.decode_e4m3(code, variant) == "nan":
                continue
            assert X.encode_e4m3(f, variant) == code


# ----------------------------------------------------------------------------------------- blocks


def test_quantize_mx_row_by_hand() -> None:
    # Block 0: amax 6 -> byte 127, codes are the values themselves; block 1: all zeros -> byte 1.
    row = [bits(v) for v in (6.0, -0.5, 1.0, 3.0)] + [0] * 28 + [0x80000000] * 32
    packed, scales = X.quantize_mx_row(row, "gfx950")
    assert scales == [127, 1]
    assert packed[:2] == [0x97, 0x52]
    assert packed[2:16] == [0] * 14
    assert packed[16:] == [0x88] * 16


def test_block_amax_nan_wins() -> None:
    assert X.block_amax_bits([bits(-3.0), 0x7F800000, bits(1.0)]) == 0x7F800000
    assert X.block_amax_bits([bits(-3.0), 0xFF800001, bits(1.0)]) == 0x7FC00000
    assert X.block_amax_bits([bits(-3.0), 0xFF800001, bits(1.0)], ignore_nan=True) == bits(3.0)
    assert X.block_amax_bits([0x7FC00000] * 4, ignore_nan=True) == 0
    assert X.block_amax_bits([0x80000000]) == 0


def test_input_validation() -> None:
    with pytest.raises(ValueError):
        X.encode_e2m1(1 << 32, "gfx950")
    with pytest.raises(TypeError):
        X.encode_e2m1(1.0, "gfx950")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        X.encode_e4m3(0, "e5m2")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        X.encode_e2m1_scaled(0, 256, "gfx950")
    with pytest.raises(ValueError):
        X.encode_e2m1(0, "nope")


def test_log2f_escalates_where_the_first_precision_leaves_a_boundary_inside(monkeypatch: pytest.MonkeyPatch) -> None:
    """A first try too coarse to decide (4 digits: an interval of +-0.1) hands every input to the
    next precision, whose answers are the usual ones; the sequence ends at 1920 digits as before."""
    assert X._LOG2_PRECISIONS[0] == 20 and X._LOG2_PRECISIONS[-1] == 1920
    inputs = [0x41800001, 0x41800006, 0x3F800001, 0x3FB504F3, 0x7F7FFFFF, 0x00000003, 0x00400001, 0x4B7FFFFF]
    X._log2f_value.cache_clear()
    usual = [X.log2f_bits(u) for u in inputs]
    tried: list[int] = []
    approx = X._log2_approx

    def recorded(r, prec):
        tried.append(prec)
        return approx(r, prec)

    monkeypatch.setattr(X, "_log2_approx", recorded)
    monkeypatch.setattr(X, "_LOG2_PRECISIONS", (4, 60))
    X._log2f_value.cache_clear()
    try:
        assert [X.log2f_bits(u) for u in inputs] == usual
    finally:
        X._log2f_value.cache_clear()  # no value decided under the patched sequence stays memoised
    assert tried == [4, 60] * len(inputs)  # none is a power of two (those need no approximation)
