"""The exact path of the AITER FP4 scorers (aiter_fp4._slow_cells): its two-limb int64 head sums
and one-pass digit sum of the value against the reference it keeps (``exact=True``: Python
integers and fractions per cell-head), bit for bit in every patch field (qk32, value, bound;
NaN payloads and zero signs included).

Every scorer call runs with ``_force_slow`` (each window cell goes through _slow_cells), and
_slow_cells is patched to evaluate each batch of cells both ways and compare. The cases: decode
and prefill, head_dim 128 / 256 / 512 (1, 2, 4 MFMA K steps), group-scale spreads 0 / 3 / 16 /
24 / 60, scale bytes drawn from whole ranges (0xFF and 0x00 among them, spans either side of
the two-limb bound, float32 overflow and underflow of qk), maximal group sums near each limit,
planted 0xFF / 0x00 bytes with NaN, Inf, subnormal and huge weights; every qk_accum and bound
model, and the profiles' four byte-0 / byte-255 rules.
The helpers are checked on their own against the scalar routines they replace, at the bit
boundaries they reason about, and the comparison itself is shown to catch a one-ulp slip.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from mxgate.inputs import logits as lc
from mxgate.oracle import scorers
from mxgate.oracle.scorers import aiter_fp4 as A
from mxgate.oracle.scorers import arithmetic as ar
from mxgate.oracle.scorers.common import QK_ACCUM, QK_MODELS

# the byte-0 (2^-127 or zero) and byte-255 (NaN or Inf) rules of the profiles, all four pairs
PROFILES = ("gfx950", "threshold", "triton-dot-scaled", "sglang-cuda-scorer")
FIELDS = ("qk32", "value", "bound")
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def assert_bits(expected: np.ndarray, actual: np.ndarray, note: str) -> None:
    """Same dtype, shape and bit patterns."""
    assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), note
    u = UINT[expected.dtype.itemsize]
    e, a = np.ascontiguousarray(expected).view(u), np.ascontiguousarray(actual).view(u)
    bad = np.flatnonzero(e != a)
    assert bad.size == 0, (f"{note}: {bad.size} of {e.size} differ, first at {bad[:4].tolist()}: "
                           f"{expected.ravel()[bad[:4]].tolist()} (reference) vs {actual.ravel()[bad[:4]].tolist()}")


@pytest.fixture
def both_paths(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Every _slow_cells call evaluated by the default path and by the reference, compared;
    counts the cells compared."""
    monkeypatch.setenv("MXGATE_THREADS", "1")  # failures raise in the caller's thread
    original = A._slow_cells
    seen = {"cells": 0}

    def compared(grp: A._Group, cells: np.ndarray, lo: int, ek: np.ndarray, opts: A.Options) -> A._Patch:
        fast = original(grp, cells, lo, ek, opts)
        ref = original(grp, cells, lo, ek, opts, exact=True)
        note = f"{opts.mode} {opts.qk_accum} {opts.bound_model} {opts.profile.name} D={grp.D}"
        assert np.array_equal(fast.r, ref.r) and np.array_equal(fast.t, ref.t), note
        for field in FIELDS:
            assert_bits(getattr(ref, field), getattr(fast, field), f"{note}: {field}")
        seen["cells"] += len(cells)
        return fast

    monkeypatch.setattr(A, "_slow_cells", compared)
    return seen


# ---- cases ----------------------------------------------------------------------------------

SCALE_RANGES = {"any": (0, 256), "mid": (90, 170), "high": (200, 255), "low": (0, 48)}  # byte ranges


def rescale(kw: dict, rng: np.random.Generator, regime: str) -> dict:
    """Scale bytes of Q and K drawn uniformly from the regime's range: 'any' holds 0xFF and 0x00,
    'mid' spans either side of _head_sums' bound, 'high' overflows float32, 'low' gives
    subnormal and zero qk."""
    lo, hi = SCALE_RANGES[regime]
    return {**kw, "q_scale": rng.integers(lo, hi, kw["q_scale"].shape, dtype=np.uint8),
            "kv_scale": rng.integers(lo, hi, kw["kv_scale"].shape, dtype=np.uint8)}


def plant(kw: dict, rng: np.random.Generator) -> dict:
    """A few 0xFF / 0x00 / 0xFE / 0x01 scale bytes, and NaN, Inf, -Inf, subnormal, huge weights."""
    qs, ks, w = kw["q_scale"].copy(), kw["kv_scale"].copy(), kw["weights"].copy()
    for byte in (0xFF, 0x00, 0xFE, 0x01):
        ks.reshape(-1)[rng.integers(0, ks.size, 4)] = byte
        qs.reshape(-1)[rng.integers(0, qs.size, 2)] = byte
    for bits in (0x7FC1, 0xFFC0, 0x7F80, 0xFF80, 0x0001, 0x7F7F, 0x8001):
        w.reshape(-1)[rng.integers(0, w.size)] = bits
    return {**kw, "q_scale": qs, "kv_scale": ks, "weights": w}


def aligned(case: lc.Fp4Case, rng: np.random.Generator) -> dict:
    """Every code +-6, one sign per group, so |I_g| = 4608 (the most a group holds), K scales
    2^0, Q scales 2^(s [g > 0]) with s per head in 44..50 (sums past 2^60 in one limb) or in
    95..102 (either side of _head_sums' bound: span 100 with G = 4, 99 with G = 8)."""
    kw = dict(case.kwargs)
    rows, H, D = case.q_codes.shape
    G = D // 32
    sign = rng.random((rows, H, G, 1)) < 0.25
    q_codes = np.broadcast_to(np.where(sign, 0xF, 0x7), (rows, H, G, 32)).reshape(rows, H, D).astype(np.uint8)
    span = np.where(rng.random((rows, H, 1)) < 0.5, rng.integers(44, 51, (rows, H, 1)),
                    rng.integers(95, 103, (rows, H, 1)))
    q_e8m0 = (100 + span * (np.arange(G) > 0)).astype(np.uint8)
    kw["q_fp4"], kw["q_scale"] = lc.scatter_q(q_codes, q_e8m0)  # 3-D q, as build makes it
    B, T = case.k_codes.shape[:2]
    kw["kv_cache"], kw["kv_scale"] = lc.scatter_kv(np.full_like(case.k_codes, 0x7), np.full_like(case.k_e8m0, 127),
                                                   kw["block_tables"], np.full(B, T), kw["kv_cache"].shape[0])
    return kw


def build(mode: str, seed: int, head_dim: int, spread: int, regime: str, heads: int = 16) -> dict:
    """Keyword arguments of the scored scorer: a small random case, its scales per ``regime``
    ('spread': as built, 'planted': plus planted specials, 'aligned': see there, else
    rescale's ranges)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    std = (0.1, 1e30)[seed % 2] if regime == "planted" else 0.1
    if mode == "decode":
        case = lc.fp4_decode_case(seed, 2, 70, 1 + seed % 2, heads, head_dim=head_dim, spread=spread,
                                  weight_std=std, shape4d=False)
    else:
        case = lc.fp4_prefill_case(seed, 2, 70, 3, heads, head_dim=head_dim, spread=spread, weight_std=std,
                                   random_windows=True)
    if regime == "planted":
        return plant(case.kwargs, rng)
    if regime == "aligned":
        return aligned(case, rng)
    return case.kwargs if regime == "spread" else rescale(case.kwargs, rng, regime)


# (mode, seed, head_dim, spread, regime): every regime in both modes, the spreads of the
# Hypothesis decode strategy and wider ones, one, two and four K steps
CASES = [
    ("decode", 11, 128, 0, "spread"), ("decode", 12, 128, 3, "spread"), ("decode", 13, 128, 16, "spread"),
    ("decode", 14, 128, 24, "spread"), ("decode", 15, 128, 60, "spread"), ("decode", 16, 256, 16, "spread"),
    ("decode", 17, 512, 16, "spread"), ("decode", 18, 128, 0, "any"), ("decode", 19, 256, 0, "mid"),
    ("decode", 20, 128, 0, "mid"), ("decode", 21, 256, 0, "high"), ("decode", 22, 128, 0, "low"),
    ("decode", 23, 512, 0, "any"), ("decode", 24, 128, 16, "planted"), ("decode", 25, 256, 24, "planted"),
    ("decode", 26, 128, 0, "aligned"), ("decode", 27, 256, 0, "aligned"),
    ("prefill", 31, 128, 16, "spread"), ("prefill", 32, 256, 3, "spread"), ("prefill", 33, 512, 24, "spread"),
    ("prefill", 34, 128, 0, "any"), ("prefill", 35, 256, 0, "mid"), ("prefill", 36, 128, 0, "high"),
    ("prefill", 37, 256, 0, "low"), ("prefill", 38, 128, 16, "planted"), ("prefill", 39, 256, 60, "planted"),
    ("prefill", 40, 128, 0, "aligned"),
]


def score(mode: str, kw: dict, **options: object) -> scorers.ScoredLogits:
    fn = scorers.pa_mqa_logits_fp4_scored if mode == "decode" else scorers.pa_mqa_logits_fp4_prefill_scored
    return fn(**kw, _force_slow=True, **options)


@pytest.mark.parametrize("mode,seed,head_dim,spread,regime", CASES,
                         ids=[f"{m}-D{d}-s{s}-{r}-{seed}" for m, seed, d, s, r in CASES])
def test_fast_path_matches_reference(both_paths: dict[str, int], mode: str, seed: int, head_dim: int, spread: int,
                                     regime: str) -> None:
    kw = build(mode, seed, head_dim, spread, regime)
    specials = regime in ("planted", "any")
    for i, (acc, model) in enumerate((a, m) for a in QK_ACCUM for m in QK_MODELS):
        for profile in PROFILES if specials else (PROFILES[i % len(PROFILES)],):
            score(mode, kw, qk_accum=acc, bound_model=model, profile=profile)
    assert both_paths["cells"] > 0, "no cell went through _slow_cells"


def test_cases_reach_every_class_of_head(both_paths: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """The cases above hold heads of every class _head_sums tells apart or rounds differently:
    sums past 2^53 (rounded to odd before float32), past 2^60 (truncated for _ratio_f64), past
    2^63 (both limbs), heads left to the reference for width, and float32 qk that overflow or
    land in the subnormals."""
    found = dict.fromkeys(["reference", "past 2^53", "past 2^60", "past 2^63", "f32 inf", "f32 subnormal"], 0)
    head_sums, f32_of = A._head_sums, A._f32_of

    def count_sums(I: np.ndarray, sh: np.ndarray, emin: np.ndarray, k_tiles: int, ksteps: bool) -> A._HeadSums:
        wide = sh.max(axis=1, initial=0) + (I.shape[1] * A.I_MAX).bit_length() > A.PAIR_BITS - 1
        mag = np.abs((I[~wide].astype(object) << sh[~wide].astype(object)).sum(axis=1))
        found["reference"] += int(wide.sum())
        for bits in (53, 60, 63):
            found[f"past 2^{bits}"] += int((mag >= 1 << bits).sum())
        return head_sums(I, sh, emin, k_tiles, ksteps)

    def count_f32(p: A.Pair, e: np.ndarray) -> np.ndarray:
        out = f32_of(p, e)
        found["f32 inf"] += int(np.isinf(out).sum())
        found["f32 subnormal"] += int(((out != 0) & (np.abs(out) < np.finfo(np.float32).tiny)).sum())
        return out

    monkeypatch.setattr(A, "_head_sums", count_sums)
    monkeypatch.setattr(A, "_f32_of", count_f32)
    for mode, seed, head_dim, spread, regime in CASES:
        score(mode, build(mode, seed, head_dim, spread, regime), qk_accum="fp32-ksteps", bound_model="any-order")
    assert all(found.values()), found


@pytest.mark.parametrize("slip", ["_f32_of", "_trunc60_f64", "dyadic_sum_f64"])
def test_one_ulp_slip_is_caught(both_paths: dict[str, int], monkeypatch: pytest.MonkeyPatch, slip: str) -> None:
    """A fast routine moved one ulp up makes the comparison fail: the test sees every bit."""
    owner = ar if slip == "dyadic_sum_f64" else A
    routine = getattr(owner, slip)

    def slipped(*args: np.ndarray) -> np.ndarray:
        out = routine(*args)
        return np.nextafter(out, np.array(np.inf, out.dtype))

    monkeypatch.setattr(owner, slip, slipped)
    with pytest.raises(AssertionError, match="differ"):
        score("decode", build("decode", 13, 128, 16, "spread"), qk_accum="fp32-ksteps", bound_model="fp32-ksteps")


# ---- the helpers against the scalar routines ---------------------------------------------------


def pairs(values: list[int]) -> A.Pair:
    """Python integers as two-limb integers (hi, lo)."""
    return (np.array([v >> A.LIMB for v in values], dtype=np.int64),
            np.array([v & ((1 << A.LIMB) - 1) for v in values], dtype=np.int64))


def boundary_ints(rng: np.random.Generator, top: int, count: int) -> list[int]:
    """Magnitudes below 2^top near powers of two, with round-to-nearest ties and near-ties at
    24, 53 and 60 bits, and random bit lengths; both signs."""
    out = []
    for b in range(top):
        p = 1 << b
        out += [p, p - 1, p + 1, p | (p >> 1), p + (p >> 53)]
        for kept in (24, 53, 60):
            half = p >> kept
            out += [p + half, p + half + 1, p + half - 1, p + 3 * half, (p | half) - 1] if half else []
    wide = [int(a) | int(b) << 62 for a, b in rng.integers(0, 1 << 62, (count, 2))]  # 124 random bits
    out += [w >> (124 - int(k)) for w, k in zip(wide, rng.integers(0, top + 1, count))]
    out = [min(v, (1 << top) - 1) for v in out]
    return out + [-v for v in out]


def exponents(rng: np.random.Generator, size: int) -> np.ndarray:
    """Grid exponents of the slow path (E = qb + kb - 256 in [-256, 254]) with the float32
    subnormal and overflow edges well represented."""
    edges = np.array([-256, -230, -200, -180, -172, -160, -149, -126, -100, 0, 60, 64, 70, 100, 104, 128, 200, 254])
    return np.where(rng.random(size) < 0.5, rng.choice(edges, size), rng.integers(-256, 255, size))


def test_bit_length() -> None:
    x = [0, 1, 2, 3] + [v for b in range(2, 63) for v in ((1 << b) - 1, 1 << b, (1 << b) + 1)] + [(1 << 63) - 1]
    assert A._bit_length(np.array(x, dtype=np.int64)).tolist() == [v.bit_length() for v in x]


def test_pair_is_the_shifted_integer() -> None:
    rng = np.random.Generator(np.random.PCG64(5))
    m = np.concatenate([rng.integers(-(1 << 24) + 1, 1 << 24, 5000), [0, 1, -1, (1 << 24) - 1, -(1 << 24) + 1]])
    s = rng.integers(0, A.LIMB + 62 - 24, m.size)
    hi, lo = A._pair(m, s)
    assert ((lo >= 0) & (lo < 1 << A.LIMB)).all()
    assert [(int(h) << A.LIMB) + int(low) for h, low in zip(hi, lo)] == [int(a) << int(b) for a, b in zip(m, s)]


@pytest.mark.parametrize("seed, fast, exact, dtype", [
    (1, "_f32_of", lambda a, e: ar.f32_nearest(a, e), np.float32),  # the float32 qk
    (2, "_trunc60_f64", lambda a, e: A._ratio_f64(a, e), np.float64),  # the float64 q64
], ids=["f32_of-is-f32_nearest", "trunc60_f64-is-ratio_f64"])
def test_pair_rounding_is_the_python_integer_rounding(seed: int, fast: str, exact, dtype) -> None:
    rng = np.random.Generator(np.random.PCG64(seed))
    num = boundary_ints(rng, A.PAIR_BITS, 20000)
    e = exponents(rng, len(num))
    want = np.array([exact(a, int(b)) for a, b in zip(num, e)], dtype=dtype)
    assert_bits(want, getattr(A, fast)(pairs(num), e), fast)


@pytest.mark.parametrize("k_tiles", [2, 3, 4])
def test_ksteps_pairs_is_ksteps_f32(k_tiles: int) -> None:
    """Steps whose magnitudes sum below 2^(PAIR_BITS - 1) (the bound _head_sums admits);
    accumulators that overflow to inf, cancel exactly, or underflow included."""
    rng = np.random.Generator(np.random.PCG64(3 + k_tiles))
    m = 20000
    top = A.PAIR_BITS - 3  # four steps below 2^top sum below 2^(PAIR_BITS - 1)
    steps = [boundary_ints(rng, top, m)[:m] for _ in range(k_tiles)]
    for s in steps:
        rng.shuffle(s)
    steps[1][: m // 8] = [-v for v in steps[0][: m // 8]]  # exact cancellation after the first step
    emin = exponents(rng, m)
    want = [A._ksteps_f32(np.array(sum(([int(s[i])] + [0] * (A.STEP_GROUPS - 1) for s in steps), []), dtype=object),
                          int(emin[i]), k_tiles) for i in range(m)]
    assert_bits(np.array(want, dtype=np.float32), A._ksteps_pairs([pairs(s) for s in steps], emin),
                f"_ksteps_pairs k_tiles={k_tiles}")


def test_dyadic_sum_f64_is_the_rounded_fraction() -> None:
    """Random terms, cancelling pairs and constructed ties (2^53 + 1, with and without a tiny
    term below), against Fraction's correct rounding."""
    rng = np.random.Generator(np.random.PCG64(4))
    R, K = 3000, 48
    v = rng.integers(-(1 << 21) + 1, 1 << 21, (R, K))
    v[rng.random((R, K)) < 0.3] = 0
    x = rng.integers(-400, 380, (R, K))
    x[: R // 3] = rng.integers(-20, 60, (R // 3, K))  # close exponents: carries and cancellation
    v[R // 3: R // 2, 1::2] = -v[R // 3: R // 2, 0::2]
    x[R // 3: R // 2, 1::2] = x[R // 3: R // 2, 0::2]
    v[-4:], x[-4:] = 0, 0
    v[-4:, :3] = [[1, 1, 0], [1, 1, 1], [-1, -1, 0], [3, 1, -1]]
    x[-4:, :3] = [[0, 53, 0], [0, 53, -40], [0, 54, 0], [-7, 60, -300]]
    want = np.array([float(sum((Fraction(int(a)) * Fraction(2) ** int(b) for a, b in zip(vr, xr)), Fraction(0)))
                     for vr, xr in zip(v, x)])
    assert_bits(want, ar.dyadic_sum_f64(v, x), "dyadic_sum_f64")


def test_dyadic_sum_f64_refuses_terms_too_wide() -> None:
    with pytest.raises(ValueError, match="could round"):
        ar.dyadic_sum_f64(np.full((1, 4), 1 << 48, dtype=np.int64), np.zeros((1, 4), dtype=np.int64))


@pytest.mark.parametrize("head_dim", [256, 512])
def test_an_overflowed_k_step_accumulator_stays_infinite_on_both_paths(head_dim: int) -> None:
    """Every scale byte 0xFE: the first 128-dim step overflows the float32 accumulator. A float32
    sum keeps it +-inf whatever the later steps add; the exact path once read it as 0 (2 of 104
    logits differed between the paths, NaN against -inf, for head_dim 256)."""
    case = lc.fp4_decode_case(5, 2, 70, 1, 16, head_dim=head_dim, spread=0, shape4d=False)
    kw = {**case.kwargs, "q_scale": np.full(case.kwargs["q_scale"].shape, 0xFE, np.uint8),
          "kv_scale": np.full(case.kwargs["kv_scale"].shape, 0xFE, np.uint8)}
    fast = scorers.pa_mqa_logits_fp4_scored(**kw, qk_accum="fp32-ksteps")
    slow = score("decode", kw, qk_accum="fp32-ksteps")
    assert (~np.isfinite(fast.emulated[fast.window])).any()  # the case does overflow
    assert_bits(fast.emulated[fast.window], slow.emulated[slow.window], "emulated, float path vs exact path")
    grp_terms = np.array([1 << 140, 0], dtype=object)  # one step far past float32, then a zero step
    assert A._ksteps_f32(np.concatenate([grp_terms, [0, 0], [0] * 4]), 0, 2) == np.float32(np.inf)
