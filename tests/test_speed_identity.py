"""The vectorised hot paths (issue 26) give the exact model's bytes, bit for bit.

Every function the speed work rewrote is held here to the slow exact model
(mxgate.oracle.exact) on all 2^16 bf16 patterns, each with the low halves that decide a
rounding (0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF), and on boundary float32 values: E2M1 and
E4M3 codes through the exact model's step tables (its answers compiled into runs of equal
codes between rounding boundaries, as test_oracle_vs_exact does), bf16 through the exact
model call by call. quantize_mx is held to the exact model on rows drawn from those patterns,
and to the oracle's own unfused path (e8m0_scale, encode_e2m1 with the scale, pack_nibbles) on
every pattern in every position, every profile, several group sizes and thread counts; the
table of e8m0 bytes to e8m0_scale on every range of 2^16 amax patterns. The exhaustive tier
runs every float32 (every sign-clear amax pattern for the scale table).
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable

import numpy as np
import pytest
from numpy.random import PCG64, Generator

from mxgate.oracle.bits import unique_patterns
from mxgate import oracle
from mxgate.oracle import exact as X
from mxgate.oracle import profiles
from mxgate.oracle.formats import e2m1
from mxgate.oracle.rounding import BLOCK, CHUNK
from mxgate.oracle.scales import _scale_table, e8m0_scale_of_bits

NAMES = profiles.names()
ALL_BF16 = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
LOW_HALVES = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF], np.uint32)
SATURATE = {"nan": False, "saturate": True, "satfinite": "satfinite"}


def boundary_float32() -> np.ndarray:
    """Zeros, subnormal and normal extremes, every E2M1/E4M3 midpoint and grid value with its
    neighbours at many binades, Inf and NaN payloads at both ends, each with both signs."""
    points = [0x00000000, 0x00000001, 0x00000002, 0x007FFFFF, 0x00800000, 0x00800001, 0x3F800000,
              0x7F7FFFFF, 0x7F7F7FFF, 0x7F7F8000, 0x7F7F8001, 0x7F800000, 0x7F800001, 0x7F807FFF,
              0x7F808000, 0x7FBFFFFF, 0x7FC00000, 0x7FC00001, 0x7FFF8000, 0x7FFFFFFF]
    values = [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0,
              240.0, 248.0, 256.0, 448.0, 464.0, 480.0, 2.0**-6, 2.0**-7, 2.0**-9, 2.0**-10, 2.0**-11]
    with np.errstate(over="ignore"):
        scaled = np.ldexp(np.array(values)[:, None], np.arange(-150, 128, 3)).astype(np.float32).ravel()
    points += [int(b) for b in scaled[np.isfinite(scaled)].view(np.uint32)]
    base = np.array(points, np.int64)
    near = (base[:, None] + np.arange(-2, 3)).ravel()
    near = near[(near >= 0) & (near <= 0x7FFFFFFF)]
    both = np.concatenate([near, near | 0x80000000])
    return unique_patterns(both.astype(np.uint32))


def patterns() -> np.ndarray:
    """Every bf16 pattern with each deciding low half, then the boundary float32 values."""
    return np.concatenate([(ALL_BF16[:, None] | LOW_HALVES).ravel(), boundary_float32()])


PATTERNS = patterns()


def as_f32(bits: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(bits, dtype=np.uint32).view(np.float32)


def first_difference(got: np.ndarray, want: np.ndarray, inputs: np.ndarray, label: str) -> None:
    bad = np.flatnonzero(got != want)
    if bad.size:
        i = bad[0]
        pytest.fail(f"{label}: {bad.size} differences; first x={int(inputs[i]):#010x} "
                    f"got={int(got[i]):#x} exact={int(want[i]):#x}")


# ---- the exact model's answers as runs of equal codes --------------------------------------------


def exact_runs(f: Callable[[int], int], breaks: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(firsts, lasts, codes) covering all 2^32 patterns, from the exact model's runs."""
    firsts, lasts, codes = (np.array(c, np.int64) for c in zip(*X.code_runs(f, breaks)))
    assert (firsts[1:] == lasts[:-1] + 1).all() and firsts[0] == 0 and lasts[-1] == 0xFFFFFFFF
    return firsts, lasts, codes


def expected_from_runs(runs: tuple[np.ndarray, np.ndarray, np.ndarray], u: np.ndarray) -> np.ndarray:
    firsts, _, codes = runs
    return codes[np.searchsorted(firsts, u.astype(np.int64), side="right") - 1].astype(np.uint8)


@functools.cache
def e2m1_runs(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    breaks = [X.f32_bits(float(m)) for m in e2m1.MIDPOINTS]
    return exact_runs(lambda b: X.encode_e2m1(b, name), breaks)


@functools.cache
def e4m3_runs(variant: str, overflow: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mags = sorted({X.decode_e4m3(c, variant) for c in range(0x80)} - {"nan"})
    points = [(a + b) / 2 for a, b in zip(mags, mags[1:])] + [mags[-1] + (mags[-1] - mags[-2]) / 2]
    breaks = [X.fraction_to_f32_bits(v) for v in points]
    return exact_runs(lambda b: X.encode_e4m3(b, variant, overflow), breaks)


# ---- element encoders (rounding.lookup) ---------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_encode_e2m1_every_bf16_pattern_and_boundary(name: str) -> None:
    got = oracle.encode_e2m1(as_f32(PATTERNS), name)
    first_difference(got, expected_from_runs(e2m1_runs(name), PATTERNS), PATTERNS, f"e2m1 {name}")


@pytest.mark.parametrize("variant", ["fn", "fnuz"])
@pytest.mark.parametrize("overflow", list(SATURATE))
def test_encode_e4m3_every_bf16_pattern_and_boundary(variant: str, overflow: str) -> None:
    got = oracle.encode_e4m3(as_f32(PATTERNS), variant, saturate=SATURATE[overflow])
    want = expected_from_runs(e4m3_runs(variant, overflow), PATTERNS)
    if (variant, overflow) == ("fnuz", "satfinite"):
        # SPEC open: the NaN code of fnuz under satfinite (test_oracle_vs_exact's FNUZ_SATFINITE_NAN):
        # exact sends NaN to 0x80, the oracle to 0x7F; every other input is the exact model's
        want[(PATTERNS & 0x7FFFFFFF) > 0x7F800000] = 0x7F
    first_difference(got, want, PATTERNS, f"e4m3{variant} {overflow}")


def test_encode_e4m3_fn_sample_through_the_exact_model_directly() -> None:
    sample = PATTERNS[:: 97]
    got = oracle.encode_e4m3(as_f32(sample), "fn")
    want = np.array([X.encode_e4m3(int(b), "fn", "nan") for b in sample], np.uint8)
    first_difference(got, want, sample, "e4m3fn direct")


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_encoders_across_chunks_blocks_and_threads(threads: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Sizes around the chunk and block edges, every thread count: the same codes everywhere.
    monkeypatch.setenv("MXGATE_THREADS", threads)
    rng = Generator(PCG64(26))
    n = 2 * BLOCK + CHUNK + 7
    u = rng.choice(PATTERNS, n)
    runs = e2m1_runs("gfx950")
    for size in (1, CHUNK - 1, CHUNK + 1, BLOCK + 3, n):
        first_difference(oracle.encode_e2m1(as_f32(u[:size]), "gfx950"), expected_from_runs(runs, u[:size]),
                         u[:size], f"e2m1 size {size}")
    shaped = u[: 6 * CHUNK].reshape(3, 2, -1)
    assert oracle.encode_e4m3(as_f32(shaped), "fn").shape == shaped.shape
    assert oracle.encode_e2m1(np.float32(0.75), "gfx950").shape == ()


# ---- bf16 ----------------------------------------------------------------------------------------

BF16_RULES = {profiles.get(n).bf16_nan: n for n in NAMES}


@functools.cache
def exact_bf16(name: str) -> np.ndarray:
    return np.array([X.round_bf16(int(b), name) for b in PATTERNS], np.uint16)


@pytest.mark.parametrize("name", sorted(BF16_RULES.values()))
def test_bf16_every_bf16_pattern_and_boundary(name: str) -> None:
    first_difference(oracle.bf16_bits(as_f32(PATTERNS), name), exact_bf16(name), PATTERNS, f"bf16 {name}")


@pytest.mark.parametrize("name", sorted(BF16_RULES.values()))
@pytest.mark.parametrize("threads", ["1", "2"])
def test_bf16_lone_nan_anywhere(name: str, threads: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The NaN rule runs only in chunks whose float max is NaN: a lone NaN (quiet, signalling,
    # either sign) at every chunk edge and in SIMD body and tail positions must still get it.
    monkeypatch.setenv("MXGATE_THREADS", threads)
    n = BLOCK + 2 * CHUNK
    positions = [0, 1, 7, 8, 15, 16, 17, 31, 63, CHUNK - 1, CHUNK, CHUNK + 1, BLOCK - 1, BLOCK, n - 1]
    for nan in (0x7F800001, 0x7FC00000, 0xFFC00000, 0xFF800001, 0x7FFFFFFF):
        u = np.full(n, 0x3F808000, np.uint32)  # 1.0039..., a tie that rounds to even
        u[positions] = nan
        got = oracle.bf16_bits(as_f32(u), name)
        want = np.full(n, X.round_bf16(0x3F808000, name), np.uint16)
        want[positions] = X.round_bf16(nan, name)
        first_difference(got, want, u, f"bf16 {name} lone NaN {nan:#x}")


def test_bf16_keeps_shapes() -> None:
    x = as_f32(PATTERNS[:600]).reshape(4, 5, 30)
    assert oracle.bf16_bits(x).shape == (4, 5, 30)
    assert oracle.bf16_bits(np.float32(1.0)).shape == ()


# ---- e8m0 scale table -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_scale_table_equals_e8m0_scale_at_every_range_edge(name: str) -> None:
    p = profiles.get(name)
    table = _scale_table(p)
    top = np.arange(1 << 15, dtype=np.uint32) << np.uint32(16)
    t = table.threshold.astype(np.int64)
    rng = Generator(PCG64(0xE8))
    lows = [np.zeros(top.size, np.int64), np.full(top.size, 0xFFFF), t - 1, t, t + 1,
            rng.integers(0, 1 << 16, top.size)]
    u = np.concatenate([top | np.clip(low, 0, 0xFFFF).astype(np.uint32) for low in lows])
    u = np.concatenate([u, boundary_float32() & np.uint32(0x7FFFFFFF),
                        rng.integers(0, 1 << 31, 1 << 18, dtype=np.uint64).astype(np.uint32)])
    with np.errstate(invalid="ignore"):
        want = oracle.e8m0_scale(as_f32(u), p)
    first_difference(e8m0_scale_of_bits(u, p), want, u, f"scale table {name}")


def test_scale_table_refuses_what_it_does_not_model() -> None:
    with pytest.raises(ValueError, match="sign bit"):
        e8m0_scale_of_bits(np.array([0x80000000], np.uint32))
    with pytest.raises(TypeError, match="uint32"):
        e8m0_scale_of_bits(np.array([1.0], np.float32))


# ---- quantize_mx ---------------------------------------------------------------------------------


def unfused(x: np.ndarray, name: str, group: int) -> tuple[np.ndarray, np.ndarray]:
    """quantize_mx from the oracle's separate parts: amax, e8m0_scale, scaled encode, pack."""
    p = profiles.get(name)
    g = x.reshape(-1, group)
    magnitude = np.abs(g)
    if p.amax_nan == "ignore":
        magnitude = np.where(np.isnan(magnitude), np.float32(0), magnitude)
    with np.errstate(invalid="ignore"):
        amax = (magnitude.view(np.uint32).max(axis=1)).view(np.float32)  # NaN bits order above Inf
        scales = oracle.e8m0_scale(amax, p)
        codes = oracle.encode_e2m1(g, p, scale=scales[:, None])
    packed = oracle.pack_nibbles(codes)
    return packed.reshape(x.shape[:-1] + (-1,)), scales.reshape(x.shape[:-1] + (-1,))


def mx_inputs() -> list[np.ndarray]:
    """Every bf16 pattern (each low half) shuffled into blocks, blocks led by one large element
    with the rest small, and boundary blocks: bits, as float32 arrays of width 192."""
    rng = Generator(PCG64(0x4D58))
    everything = rng.permutation((ALL_BF16[:, None] | LOW_HALVES).ravel())
    finite = everything[(everything & 0x7F800000) != 0x7F800000]
    led = rng.choice(finite, (4608, 32))
    led[:, 0] = rng.choice(finite, 4608)
    led[:, 1:] = (led[:, 1:] & np.uint32(0x807FFFFF)) | (
        ((led[:, :1] >> 23 & 0xFF).astype(np.int64) - rng.integers(0, 12, (4608, 31))).clip(0, 254).astype(np.uint32) << 23)
    bounds = boundary_float32()
    bounds = np.resize(rng.permutation(bounds), -(-bounds.size // 192) * 192)
    return [as_f32(everything).reshape(-1, 192), as_f32(led).reshape(-1, 192), as_f32(bounds).reshape(-1, 192)]


MX_INPUTS = mx_inputs()


@pytest.mark.parametrize("name", NAMES)
def test_quantize_mx_equals_its_unfused_parts(name: str) -> None:
    for x in MX_INPUTS:
        for group in (2, 6, 32, 192):
            got, want = oracle.quantize_mx(x, name, group), unfused(x, name, group)
            for g, w, what in zip(got, want, ("packed", "scales")):
                assert g.shape == w.shape and g.dtype == w.dtype == np.uint8
                if not np.array_equal(g, w):
                    i = np.flatnonzero(g.ravel() != w.ravel())[0]
                    pytest.fail(f"{name} group {group} {what}: {np.count_nonzero(g != w)} differ, first at flat {i}")


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_quantize_mx_across_blocks_and_threads(threads: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MXGATE_THREADS", threads)
    rng = Generator(PCG64(7))
    bits = rng.choice(PATTERNS, (3 * BLOCK + 4 * 32 * 37) // 32 * 32)
    x = as_f32(bits).reshape(-1, 128)
    for name in ("gfx950", "threshold", "aiter-py", "ocp"):
        for group in (32, 4):
            got, want = oracle.quantize_mx(x, name, group), unfused(x, name, group)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), (name, group)


@pytest.mark.parametrize("name", NAMES)
def test_quantize_mx_rows_through_the_exact_model(name: str) -> None:
    rows = np.concatenate([x.reshape(-1, 32).view(np.uint32) for x in MX_INPUTS])
    pick = Generator(PCG64(zlib.crc32(name.encode()))).choice(rows.shape[0], 24, replace=False)
    pick = np.concatenate([pick, [0, rows.shape[0] - 1]])
    packed, scales = oracle.quantize_mx(as_f32(rows[pick]), name)
    for i, r in enumerate(pick):
        want_packed, want_scales = X.quantize_mx_row([int(b) for b in rows[r]], name, quotient="f32")
        assert list(scales[i]) == want_scales and list(packed[i]) == want_packed, (name, int(r))


# ---- exhaustive tier -----------------------------------------------------------------------------


def _every_float32(check: Callable[[np.ndarray], None], log2_chunk: int = 24) -> None:
    for start in range(0, 1 << 32, 1 << log2_chunk):
        check(np.arange(start, start + (1 << log2_chunk), dtype=np.uint64).astype(np.uint32))


@pytest.mark.exhaustive
@pytest.mark.parametrize("name", sorted(BF16_RULES.values()))
def test_bf16_every_float32(name: str) -> None:
    # The independent reference here is the rule itself, written out in int64: add half an
    # ulp minus one plus the kept lowest bit, drop 16 bits; NaN codes from the exact model.
    positive_nan, negative_nan = X.round_bf16(0x7F800001, name), X.round_bf16(0xFF800001, name)

    def check(u: np.ndarray) -> None:
        w = u.astype(np.int64)
        want = (((w + 0x7FFF + ((w >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
        nan = (u & 0x7FFFFFFF) > 0x7F800000
        if nan.any():  # every rule's NaN code depends on the sign at most
            want[nan] = np.where(u[nan] >> 31 != 0, negative_nan, positive_nan)
        first_difference(oracle.bf16_bits(as_f32(u), name), want, u, f"bf16 {name}")

    _every_float32(check)


@pytest.mark.exhaustive
@pytest.mark.parametrize("name", NAMES)
def test_scale_table_every_amax_pattern(name: str) -> None:
    p = profiles.get(name)

    def check(u: np.ndarray) -> None:
        u = u[u <= 0x7FFFFFFF]
        if u.size:
            with np.errstate(invalid="ignore"):
                want = oracle.e8m0_scale(as_f32(u), p)
            first_difference(e8m0_scale_of_bits(u, p), want, u, f"scale table {name}")

    for start in range(0, 1 << 31, 1 << 24):
        check(np.arange(start, start + (1 << 24), dtype=np.uint32))


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.uint32, np.int64])
def test_unique_patterns_is_numpys_unique(dtype: type) -> None:
    """The sort-based unique the tests and inputs use (NumPy 2.3+ hashes integers, slowly) gives
    np.unique's values, first indices and dtypes, empty and 2-D inputs included (seed 26)."""
    rng = np.random.default_rng(26)
    for shape in [(0,), (1,), (7, 3), (1 << 16,)]:
        a = rng.integers(0, 100 if dtype == np.uint8 else 5000, shape).astype(dtype)
        values, first = np.unique(a, return_index=True)
        got_values, got_first = unique_patterns(a, return_index=True)
        assert got_values.dtype == values.dtype and got_first.dtype == first.dtype
        np.testing.assert_array_equal(got_values, values)
        np.testing.assert_array_equal(got_first, first)
        np.testing.assert_array_equal(unique_patterns(a), values)
    with pytest.raises(TypeError, match="integer bit patterns"):
        unique_patterns(np.float32([1.0, 1.0]))
