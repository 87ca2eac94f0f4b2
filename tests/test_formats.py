"""Unit tests of the fast oracle's codecs: literal facts from docs/spec.md, validation, properties.

The exhaustive comparison against the exact model lives in test_oracle_vs_exact.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mxgate import oracle
from mxgate.oracle import profiles, scales

MIDPOINTS = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
# SPEC section 2: the code each profile gives at each midpoint (positive side, then negative side).
TIE_EXPECTATIONS = {
    "gfx950": ([0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6], [0x8, 0xA, 0xA, 0xC, 0xC, 0xE, 0xE]),
    "argmin": ([0x0, 0x1, 0x2, 0x3, 0x4, 0x5, 0x6], [0x9, 0xA, 0xB, 0xC, 0xD, 0xE, 0xF]),
    "threshold": ([0x0, 0x1, 0x2, 0x3, 0x4, 0x5, 0x6], [0x0, 0x9, 0xA, 0xB, 0xC, 0xD, 0xE]),
    "sglang-rne": ([0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6], [0x0, 0xA, 0xA, 0xC, 0xC, 0xE, 0xE]),
    "microxcaling": ([0x1, 0x2, 0x3, 0x4, 0x5, 0x6, 0x7], [0x9, 0xA, 0xB, 0xC, 0xD, 0xE, 0xF]),
}


def test_decode_all_sixteen_codes() -> None:
    expected = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    got = oracle.decode_e2m1(np.arange(16, dtype=np.uint8))
    assert got.tolist() == expected
    assert np.signbit(got[8])  # 0x8 is -0 (BUGS #15)


@pytest.mark.parametrize("name", sorted(TIE_EXPECTATIONS))
def test_midpoint_ties_per_profile(name: str) -> None:
    positive, negative = TIE_EXPECTATIONS[name]
    x = np.array(MIDPOINTS, dtype=np.float32)
    assert oracle.encode_e2m1(x, name).tolist() == positive
    assert oracle.encode_e2m1(-x, name).tolist() == negative


@pytest.mark.parametrize("name", profiles.names())
def test_one_ulp_off_each_midpoint_is_not_a_tie(name: str) -> None:
    # BUGS #8: a >= instead of > at a boundary shows up exactly one ulp away from it.
    x = np.array(MIDPOINTS, dtype=np.float32)
    up = oracle.encode_e2m1(np.nextafter(x, np.float32(np.inf)), name) & 7
    down = oracle.encode_e2m1(np.nextafter(x, np.float32(0)), name) & 7
    assert (up == np.arange(1, 8)).all()
    assert (down == np.arange(0, 7)).all()


@pytest.mark.parametrize(
    ("name", "neg_zero", "neg_tiny", "nan", "neg_nan"),
    [
        ("gfx950", 0x8, 0x8, 0x7, 0xF),
        ("aiter-py", 0x8, 0x8, 0x3, 0xB),
        ("aiter-gfx942", 0x0, 0x8, 0x0, 0x0),
        ("argmin", 0x0, 0x0, 0xF, 0xF),
        ("threshold", 0x0, 0x0, 0x7, 0x7),
        ("cuda-satfinite", 0x8, 0x8, 0x7, 0x7),
        ("ml_dtypes", 0x8, 0x8, 0x8, 0x0),
    ],
)
def test_sign_of_zero_and_nan(name: str, neg_zero: int, neg_tiny: int, nan: int, neg_nan: int) -> None:
    x = np.array([-0.0, -0.1, np.nan], dtype=np.float32)
    x = np.append(x, -x[2:3])  # -NaN: the sign bit set on the canonical quiet NaN
    assert x.view(np.uint32)[3] == 0xFFC00000
    assert oracle.encode_e2m1(x, name).tolist() == [neg_zero, neg_tiny, nan, neg_nan]


def test_saturation_and_inf() -> None:
    x = np.array([6.0, 7.9, 1e30, np.inf, -np.inf], dtype=np.float32)
    assert oracle.encode_e2m1(x, "gfx950").tolist() == [7, 7, 7, 7, 0xF]
    assert oracle.encode_e2m1(x, "argmin").tolist() == [7, 7, 7, 0xF, 0xF]  # all distances inf: first grid entry


def test_pack_order_low_nibble_first() -> None:
    codes = np.array([[0x1, 0x2, 0xF, 0x8]], dtype=np.uint8)
    packed = oracle.pack_nibbles(codes)
    assert packed.tolist() == [[0x21, 0x8F]]
    assert (oracle.unpack_nibbles(packed) == codes).all()


@given(hnp.arrays(np.uint8, st.tuples(st.integers(1, 5), st.integers(1, 40).map(lambda n: 2 * n)), elements=st.integers(0, 15)))
def test_pack_unpack_roundtrip(codes: np.ndarray) -> None:
    assert (oracle.unpack_nibbles(oracle.pack_nibbles(codes)) == codes).all()


@pytest.mark.parametrize(("byte0", "byte255"), [("pow2", "nan"), ("zero", "inf")])
def test_e8m0_decode_special_bytes(byte0: str, byte255: str) -> None:
    from dataclasses import replace

    p = replace(profiles.get("gfx950"), name="t", byte0=byte0, byte255=byte255)
    got = oracle.decode_e8m0(np.array([0, 1, 127, 254, 255], dtype=np.uint8), p)
    assert got[0] == (0.0 if byte0 == "zero" else 2.0**-127)  # BUGS #18
    assert got[1] == 2.0**-126 and got[2] == 1.0 and got[3] == 2.0**127
    assert np.isnan(got[4]) if byte255 == "nan" else got[4] == np.inf


def test_zero_group_scales() -> None:
    zero = np.zeros(1, np.float32)
    assert oracle.e8m0_scale(zero, "gfx950")[0] == 1  # floor 6*2^-126 -> E = 1 (SPEC section 3)
    assert oracle.e8m0_scale(zero, "aiter-per1x32")[0] == 92  # floor 1e-10 -> E = 92


RCEIL_PROFILES = [n for n in profiles.names() if profiles.get(n).scale_policy in ("rceil", "rceil_log2f")]


@pytest.mark.parametrize("name", RCEIL_PROFILES)
def test_scale_never_saturates_the_block_max_under_rceil(name: str) -> None:
    # BUGS #1: amax / scale must stay <= 6 under RCEIL policies, over every binade and bucket.
    p = profiles.get(name)
    exponents = np.arange(-120, 120, dtype=np.int64)
    mantissas = np.linspace(0, (1 << 23) - 1, 97).astype(np.int64)
    bits = ((exponents[:, None] + 127) << 23 | mantissas[None, :]).astype(np.uint32).reshape(-1)
    amax = bits.view(np.float32)
    scale = oracle.decode_e8m0(oracle.e8m0_scale(amax, p), p).astype(np.float64)
    inside = amax.astype(np.float64) >= (p.amax_floor or 0) * (6 if p.floor_where == "after" else 1)
    clamped = np.zeros_like(inside)
    if p.exp_clamp is not None:
        e = oracle.e8m0_scale(amax, p)
        clamped = (e == p.exp_clamp[0]) | (e == p.exp_clamp[1])
    ok = amax.astype(np.float64) / scale <= 6.0
    assert ok[inside & ~clamped].all()


def test_log2f_table_total_matches_spec() -> None:
    # SPEC section 4: exp2f(ceilf(log2f(s))) stays below the bitwise ceil for exactly 3,700 floats.
    table = scales.log2f_threshold_table()
    k = np.arange(-149, 128)
    normal = int(table[k >= -126].sum())
    subnormal = sum(int(table[kk + 149]) >> (23 - (kk + 149)) for kk in range(-149, -126))
    assert normal + subnormal == 3700
    assert not table[(k >= -4) & (k < 4)].any()  # none in [1/16, 16)


def test_ue8m0_log2f_vs_bitwise_at_a_binade_edge() -> None:
    k = 20
    j_max = int(scales.log2f_threshold_table()[k + 149])
    assert j_max > 0
    s = np.array([((k + 127) << 23) | j for j in (0, 1, j_max, j_max + 1)], np.uint32).view(np.float32)
    assert scales.ue8m0_round(s, "log2f").tolist() == [2.0**k, 2.0**k, 2.0**k, 2.0 ** (k + 1)]
    assert scales.ue8m0_round(s, "bitwise").tolist() == [2.0**k] + [2.0 ** (k + 1)] * 3


@pytest.mark.parametrize("name", profiles.names())
@settings(max_examples=40)
@given(data=st.data())
def test_quant_dequant_is_idempotent(name: str, data: st.DataObject) -> None:
    # BUGS #33: dequant(quant(dequant(quant(x)))) == dequant(quant(x)) for finite blocks.
    rows = data.draw(st.integers(1, 4))
    scale = data.draw(st.sampled_from([2.0**-20, 1e-3, 1.0, 37.0, 2.0**40]))
    seed = data.draw(st.integers(0, 2**32 - 1))
    x = np.random.Generator(np.random.PCG64(seed)).standard_normal((rows, 64)).astype(np.float32) * np.float32(scale)
    once = oracle.dequantize_mx(*oracle.quantize_mx(x, name), name)
    twice = oracle.dequantize_mx(*oracle.quantize_mx(once, name), name)
    assert np.array_equal(once, twice), f"seed {seed}"


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: oracle.encode_e2m1(np.zeros(4), "gfx950"), TypeError, ["x", "float32"]),
        (lambda: oracle.encode_e2m1([1.0, 2.0], "gfx950"), TypeError, ["x", "numpy array"]),
        (lambda: oracle.encode_e2m1(np.zeros(4, np.float32), "nope"), ValueError, ["profile", "gfx950"]),
        (lambda: oracle.quantize_mx(np.zeros((2, 48), np.float32)), ValueError, ["x", "multiple of group=32", "48"]),
        (lambda: oracle.quantize_mx(np.zeros(64, np.float32), group=3), ValueError, ["group"]),
        (lambda: oracle.e8m0_scale(np.array([-1.0], np.float32)), ValueError, ["amax", ">= 0"]),
        (lambda: oracle.encode_e4m3(np.zeros(2, np.float32), variant="e5m2"), ValueError, ["variant", "fnuz"]),
        (lambda: oracle.encode_e4m3(np.zeros(2, np.float32), saturate="yes"), ValueError, ["saturate"]),
        (lambda: oracle.decode_e2m1(np.array([16], np.uint8)), ValueError, ["codes", "unpack_nibbles"]),
        (lambda: oracle.pack_nibbles(np.zeros(3, np.uint8)), ValueError, ["codes", "even"]),
        (lambda: oracle.dequantize_mx(np.zeros((1, 16), np.uint8), np.zeros((1, 2), np.uint8)), ValueError, ["e8m0", "shape"]),
    ],
)
def test_bad_input_names_argument_and_rule(call, error, words) -> None:
    with pytest.raises(error) as info:
        call()
    for word in words:
        assert word in str(info.value)


def test_numpy_scalars_follow_the_array_rules() -> None:
    assert int(oracle.encode_e2m1(np.float32(0.75), "gfx950")) == 0x2
    assert int(oracle.bf16_bits(np.float32(1.00390625))) == 0x3F80  # tie at bit 16: to even
    with pytest.raises(ValueError, match="exactly representable"):
        oracle.encode_e2m1(np.float64(0.1), "gfx950")  # a lossy float64 is refused, not rounded
