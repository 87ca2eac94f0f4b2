"""Scorer oracles: emulated order vs exact value vs a plain float64 reference, windows, fills,
the fast path against the Python-integer path, FP8 and sglang profiles, and input checks."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mxgate import oracle
from mxgate.conformance.judge import compare_logits
from mxgate.inputs import logits as lc
from mxgate.oracle.scorers import aiter_fp4 as logits
from mxgate.oracle.scorers.aiter_fp8 import pa_mqa_logits_fp8, pa_mqa_logits_fp8_scored
from mxgate.oracle.scorers.arithmetic import dyadic_total, f32_nearest, f64_nearest, float_dyadic, weighted_sum_f64
from mxgate.oracle.scorers.sglang import (
    fp4_index_logits_decode,
    fp4_index_logits_decode_scored,
    fp4_index_logits_paged_scored,
)

AITER_CONFIGS = [(2, 512, 1, 64), (3, 1024, 1, 64), (2, 512, 2, 64), (2, 768, 1, 128), (4, 2048, 1, 64)]


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint64 if a.dtype == np.float64 else np.uint32)


def assert_within(s: logits.ScoredLogits, seed: object) -> None:
    w = s.window
    err = np.abs(s.emulated[w].astype(np.float64) - s.value[w])
    bad = ~(err <= s.bound[w])
    assert not bad.any(), f"seed {seed}: {int(bad.sum())} cells outside the bound, worst ratio {np.max(err / s.bound[w])}"


def assert_window(out: np.ndarray, window: np.ndarray, fill: np.ndarray, seed: object) -> None:
    changed = ~window & (bits(out) != bits(fill))
    assert not changed.any(), f"seed {seed}: cell {np.argwhere(changed)[0]} outside the window was written"


# ---- dyadic inputs: every float32 sum exact -------------------------------------------------


def dyadic_case(seed: int, batch: int = 2, ctx: int = 150, next_n: int = 2, heads: int = 64) -> lc.Fp4Case:
    """Codes with |value| <= 2, scales in {126, 127, 128}, weights in {0, +-0.5, +-1, +-2},
    weight_scale 2: qk < 2^11, products < 2^12 on a 2^-5 grid, sums of 64 below 2^24."""
    rng = lc.rng_for(seed)
    B, H, D = batch, heads, 128
    mags = np.array([0, 1, 2, 3, 4], dtype=np.uint8)  # 0, 0.5, 1, 1.5, 2
    def codes(shape):
        return mags[rng.integers(0, 5, shape)] | (rng.integers(0, 2, shape).astype(np.uint8) << 3)
    case = lc.fp4_decode_case(seed, B, ctx, next_n, H, context_lens=np.full(B, ctx))
    case.q_codes[:] = codes(case.q_codes.shape)
    case.k_codes[:] = codes(case.k_codes.shape)
    case.q_e8m0[:] = rng.integers(126, 129, case.q_e8m0.shape)
    case.k_e8m0[:] = rng.integers(126, 129, case.k_e8m0.shape)
    case.weights[:] = rng.choice(np.array([0, 0.5, -0.5, 1, -1, 2, -2], np.float32), case.weights.shape)
    table = case.kwargs["block_tables"]
    kv, ks = lc.scatter_kv(case.k_codes, case.k_e8m0, table, case.end * 0 + ctx, case.kwargs["kv_cache"].shape[0])
    q, qs = lc.scatter_q(case.q_codes, case.q_e8m0)
    case.kwargs.update(q_fp4=q.reshape(B, next_n, H, D // 2), q_scale=qs.reshape((B, next_n) + qs.shape[1:]),
                       kv_cache=kv, kv_scale=ks, weights=oracle.bf16_bits(case.weights), weight_scale=2.0)
    case.weight_scale = np.float32(2.0)
    return case


@pytest.mark.parametrize("qk_accum", ["fp32-ksteps", "fp32-groups"])
def test_dyadic_decode_all_three_agree(qk_accum: str) -> None:
    case = dyadic_case(3)
    s = logits.pa_mqa_logits_fp4_scored(**case.kwargs, qk_accum=qk_accum)
    ref = lc.reference_f64(case, case.kwargs["max_seq_len"])
    w = s.window
    assert w.sum() > 0
    assert np.array_equal(bits(s.emulated[w].astype(np.float64)), bits(s.value[w])), "seed 3"
    assert np.array_equal(bits(s.value[w]), bits(ref[w])), "seed 3"


def test_dyadic_prefill_all_three_agree() -> None:
    case = dyadic_case(4, next_n=1)
    k = case.kwargs
    B = k["context_lens"].shape[0]
    info = np.stack([np.arange(B), np.full(B, 10), np.full(B, 140), np.zeros(B)], axis=1).astype(np.int32)
    pre = dict(q_fp4=k["q_fp4"].reshape(B, *k["q_fp4"].shape[2:]), q_scale=k["q_scale"].reshape(B, *k["q_scale"].shape[2:]),
               kv_cache=k["kv_cache"], kv_scale=k["kv_scale"], block_tables=k["block_tables"], weights=k["weights"],
               row_info=info, max_seq_len=k["max_seq_len"], weight_scale=2.0)
    s = logits.pa_mqa_logits_fp4_prefill_scored(**pre)
    case.start, case.end = info[:, 1].astype(np.int64), info[:, 2].astype(np.int64)
    ref = lc.reference_f64(case, k["max_seq_len"])
    w = s.window
    assert np.array_equal(bits(s.emulated[w].astype(np.float64)), bits(s.value[w]))
    assert np.array_equal(bits(s.value[w]), bits(ref[w]))


# ---- random inputs: within the bound, every AITER op-test config ---------------------------------


@pytest.mark.parametrize("qk_accum", ["fp32-ksteps", "fp32-groups"])
@pytest.mark.parametrize("cfg", AITER_CONFIGS, ids=lambda c: "b{}_ctx{}_n{}_h{}".format(*c))
def test_aiter_configs_within_bound(cfg: tuple[int, int, int, int], qk_accum: str) -> None:
    seed = 100 + sum(cfg)
    case = lc.fp4_decode_case(seed, *cfg)
    s = logits.pa_mqa_logits_fp4_scored(**case.kwargs, qk_accum=qk_accum)
    assert_within(s, seed)
    assert np.array_equal(np.isneginf(s.emulated), ~s.window), f"seed {seed}"
    ref = lc.reference_f64(case, case.kwargs["max_seq_len"])
    assert np.allclose(s.value[s.window], ref[s.window], rtol=1e-12, atol=1e-30), f"seed {seed}"
    plain = logits.pa_mqa_logits_fp4(**case.kwargs, qk_accum=qk_accum)
    assert np.array_equal(bits(plain), bits(s.emulated)), f"seed {seed}"


def test_caller_fill_is_kept_and_outside_is_minus_inf() -> None:
    seed = 21
    case = lc.fp4_decode_case(seed, 3, 300, 3, 32, context_lens=np.array([0, 65, 300]))
    width = case.kwargs["max_seq_len"]
    poison = np.full((9, width), np.float32(np.nan))
    poison.view(np.uint32)[:] = 0x7FA5A5A5
    out = poison.copy()
    got = logits.pa_mqa_logits_fp4(**case.kwargs, out=out)
    assert got is out
    s = logits.pa_mqa_logits_fp4_scored(**case.kwargs)
    assert_window(out, s.window, poison, seed)
    assert np.array_equal(bits(out[s.window]), bits(s.emulated[s.window]))
    fresh = logits.pa_mqa_logits_fp4(**case.kwargs)
    assert np.all(np.isneginf(fresh[~s.window]))
    # MTP mask: row n of batch b scores t < ctx - (next_n - 1 - n)
    assert s.window[3:6].sum(axis=1).tolist() == [63, 64, 65]
    assert not s.window[0:3].any()


def test_prefill_random_windows_within_bound_and_fill() -> None:
    seed = 31
    case = lc.fp4_prefill_case(seed, 2, 260, 6, 32, random_windows=True)
    s = logits.pa_mqa_logits_fp4_prefill_scored(**case.kwargs)
    assert_within(s, seed)
    rows, width = s.window.shape
    poison = np.full((rows, width), np.float32(7.25))
    out = poison.copy()
    logits.pa_mqa_logits_fp4_prefill(**case.kwargs, out=out)
    assert_window(out, s.window, poison, seed)
    assert np.array_equal(bits(out[s.window]), bits(s.emulated[s.window]))
    win = (np.arange(width)[None, :] >= case.start[:, None]) & (np.arange(width)[None, :] < case.end[:, None])
    assert np.array_equal(win, s.window)


@pytest.mark.parametrize("spread", [0, 12, 40])
@pytest.mark.parametrize("qk_accum", ["fp32-ksteps", "fp32-groups"])
def test_fast_path_matches_python_integer_path(spread: int, qk_accum: str) -> None:
    """The vectorised path and the per-cell Python-integer path agree bit for bit."""
    seed = 41 + spread
    case = lc.fp4_decode_case(seed, 2, 70, 2, 16, spread=spread, context_lens=np.array([70, 3]))
    a = logits.pa_mqa_logits_fp4_scored(**case.kwargs, qk_accum=qk_accum)
    b = logits.pa_mqa_logits_fp4_scored(**case.kwargs, qk_accum=qk_accum, _force_slow=True)
    assert np.array_equal(bits(a.emulated), bits(b.emulated)), f"seed {seed}"
    assert np.array_equal(bits(a.value), bits(b.value)), f"seed {seed}"
    w = a.window
    assert np.allclose(a.bound[w], b.bound[w], rtol=1e-9), f"seed {seed}"
    assert_within(a, seed)


def test_head_dim_256_two_mfma_steps() -> None:
    seed = 51
    case = lc.fp4_decode_case(seed, 2, 100, 1, 16, head_dim=256, spread=3)
    for acc in ("fp32-ksteps", "fp32-groups"):
        a = logits.pa_mqa_logits_fp4_scored(**case.kwargs, qk_accum=acc, bound_model="fp32-ksteps")
        b = logits.pa_mqa_logits_fp4_scored(**case.kwargs, qk_accum=acc, bound_model="fp32-ksteps", _force_slow=True)
        assert np.array_equal(bits(a.emulated), bits(b.emulated)), f"seed {seed}"
        assert_within(a, seed)


def test_special_scale_bytes_give_nan_cells() -> None:
    seed = 61
    case = lc.fp4_decode_case(seed, 1, 64, 1, 16, context_lens=np.array([64]))
    kv_scale = case.kwargs["kv_scale"].copy()
    t = 5
    slot = int(case.kwargs["block_tables"][0, 0]) * 64 + t
    layout = oracle.layouts.get("aiter-fp4-kv-scale")
    (rows,) = layout.gather(kv_scale, slots=np.array([slot]))
    rows[0, 2] = 0xFF
    layout.scatter(kv_scale, rows, slots=np.array([slot]))
    s = logits.pa_mqa_logits_fp4_scored(**{**case.kwargs, "kv_scale": kv_scale})
    assert np.isnan(s.emulated[0, t]) and np.isnan(s.value[0, t])
    assert np.isfinite(s.emulated[0, t + 1])
    check = compare_logits(s, s.emulated.copy())
    assert check.verdict == "exact"


# ---- hypothesis: ragged lengths, next_n, gaps, far-apart group scales ------------------------

LENGTHS = st.sampled_from([0, 1, 2, 63, 64, 65, 127, 128, 129, 191, 192, 200])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), next_n=st.integers(1, 4), heads=st.sampled_from([16, 32]),
       lens=st.lists(LENGTHS, min_size=1, max_size=3), spread=st.sampled_from([0, 0, 4, 24]),
       qk_accum=st.sampled_from(["fp32-ksteps", "fp32-groups"]), shape4d=st.booleans())
def test_hypothesis_decode(seed, next_n, heads, lens, spread, qk_accum, shape4d) -> None:
    B = len(lens)
    ctx = np.array(lens)
    case = lc.fp4_decode_case(seed, B, 200, next_n, heads, context_lens=ctx, spread=spread, shape4d=shape4d)
    s = logits.pa_mqa_logits_fp4_scored(**case.kwargs, qk_accum=qk_accum)
    assert_within(s, seed)
    n = np.tile(np.arange(next_n), B)
    end = np.maximum(np.repeat(ctx, next_n) - (next_n - 1 - n), 0)
    assert np.array_equal(s.window.sum(axis=1), end), f"seed {seed}"
    assert np.array_equal(np.isneginf(s.emulated), ~s.window), f"seed {seed}"
    ref = lc.reference_f64(case, 200)
    assert np.allclose(s.value[s.window], ref[s.window], rtol=1e-9, atol=0), f"seed {seed}"


# ---- the exact head sum ------------------------------------------------------------------------


def test_weighted_sum_f64_against_fractions() -> None:
    rng = lc.rng_for(5)
    for trial in range(40):
        H = int(rng.integers(1, 130))
        a_bits = int(rng.integers(1, 50))
        a = rng.integers(0, 2**a_bits, (2, H, 3)).astype(np.float64)
        a[rng.random(a.shape) < 0.3] = 0
        m = rng.integers(-(2**24) + 1, 2**24, (2, H))
        spread = int(rng.choice([0, 5, 60, 300]))
        f = rng.integers(-spread - 100, spread - 99, (2, H))
        got = weighted_sum_f64(a, a_bits, m, f)
        for r in range(2):
            for t in range(3):
                want = sum((Fraction(int(a[r, h, t]) * int(m[r, h])) * Fraction(2) ** int(f[r, h]) for h in range(H)),
                           Fraction(0))
                assert float(want) == got[r, t], f"trial {trial}"


def test_f32_nearest_rounds_ties_to_even_and_subnormals() -> None:
    assert f32_nearest(3, -150) == np.float32(2.0**-148)  # 1.5 * 2^-149 -> tie -> even (2)
    assert f32_nearest(1, -150) == np.float32(0.0)  # half of the smallest subnormal -> 0 (even)
    assert f32_nearest(2**24 + 1, 0) == np.float32(2**24)
    assert f32_nearest(2**24 + 3, 0) == np.float32(2**24 + 4)
    assert np.isinf(f32_nearest(2**25 - 1, 103))


def test_float_dyadic_on_every_sign_and_finite_float32_exponent() -> None:
    """Each of the 510 finite float32 (sign, exponent) fields with edge and random fractions (seed
    20261206), and float64's extremes: m * 2**e is the value exactly."""
    fracs = np.concatenate([[0, 1, 0x400000, 0x7FFFFF], np.random.default_rng(20261206).integers(0, 1 << 23, 4)])
    fields = np.arange(255, dtype=np.uint32)
    bits = ((np.arange(2, dtype=np.uint32)[:, None, None] << 31) | (fields[None, :, None] << 23)
            | fracs.astype(np.uint32)[None, None, :]).ravel()
    extremes = [5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308, -0.0]
    for value in [float(v) for v in bits.view(np.float32)] + extremes:
        m, e = float_dyadic(value)
        assert Fraction(m) * Fraction(2) ** e == Fraction(value), value.hex()


# ---- judging ---------------------------------------------------------------------------------


def test_compare_accepts_other_order_and_rejects_scale_bug() -> None:
    seed = 71
    case = lc.fp4_decode_case(seed, 2, 400, 1, 64)
    s = logits.pa_mqa_logits_fp4_scored(**case.kwargs)
    assert compare_logits(s, s.emulated.copy()).verdict == "exact"
    # a sequential head sum in float32: a legal order, not the emulated one
    other = np.full_like(s.emulated, -np.inf)
    qv = lc.dequant(case.q_codes, case.q_e8m0)
    kv = lc.dequant(case.k_codes, case.k_e8m0)
    for r in range(2):
        e = int(case.end[r])
        qk = (qv[r] @ kv[r, :e].T).astype(np.float32)
        p = np.maximum(qk, 0) * case.weights[r][:, None]
        acc = np.zeros(e, np.float32)
        for h in range(64):
            acc += p[h]
        other[r, :e] = acc * case.weight_scale
    check = compare_logits(s, other)
    assert check.verdict in ("acceptable", "exact"), check.reason
    assert check.outside == 0
    # one group's scale read off by one binade in one cell: outside the bound
    bad = s.emulated.copy()
    r, t = 1, int(case.end[1]) // 2
    bad[r, t] = bad[r, t] * np.float32(2.0) + np.float32(1.0)
    check = compare_logits(s, bad)
    assert check.verdict == "fail" and check.first_outside == (r, t), check.reason
    # writing outside the window
    leak = s.emulated.copy()
    leak[0, -1] = 0.0
    if not s.window[0, -1]:
        assert compare_logits(s, leak).verdict == "fail"


# ---- FP8 and sglang profiles ----------------------------------------------------------------------


@pytest.mark.parametrize("preshuffle", [False, True])
@pytest.mark.parametrize("variant", ["fn", "fnuz"])
def test_fp8_within_bound_and_layouts_agree(preshuffle: bool, variant: str) -> None:
    seed = 81
    case = lc.fp8_decode_case(seed, 2, 200, 2, 64, preshuffle=preshuffle, variant=variant)
    s = pa_mqa_logits_fp8_scored(**case.kwargs)
    assert_within(s, seed)
    assert np.array_equal(np.isneginf(s.emulated), ~s.window)
    base = lc.fp8_decode_case(seed, 2, 200, 2, 64, preshuffle=False, variant=variant)
    assert np.array_equal(bits(pa_mqa_logits_fp8(**base.kwargs)), bits(s.emulated)), "layouts disagree"
    ref = np.full(s.window.shape, -np.inf)
    for r in range(len(case.batch)):
        b, e = case.batch[r], case.end[r]
        qk = case.q_values[r] @ case.k_values[b, :e].T
        ref[r, :e] = (np.maximum(qk * case.k_scale[b, :e], 0) * case.weights[r][:, None]).sum(axis=0)
    assert np.allclose(ref[s.window], s.value[s.window], rtol=1e-12)


def test_fp8_dyadic_all_agree() -> None:
    case = lc.fp8_decode_case(82, 2, 100, 1, 32)
    k = case.kwargs
    rng = lc.rng_for(82)
    q = rng.choice(np.array([0x00, 0x38, 0x40, 0xB8, 0xC0], np.uint8), k["q_fp8"].shape)  # 0, +-1, +-2
    k["q_fp8"] = q
    kv = k["kv_cache"]
    lay = oracle.layouts.get("aiter-fp8-kv")
    data, sc = lay.gather(kv)
    data[:] = rng.choice(np.array([0x00, 0x38, 0xB8, 0x30], np.uint8), data.shape)  # 0, +-1, 0.5
    lay.scatter(kv, data, np.full(sc.shape, 0.25, np.float32))
    k["weights"] = rng.choice(np.array([0, 1, -1, 0.5], np.float32), k["weights"].shape)
    s = pa_mqa_logits_fp8_scored(**k, head_order="pairwise")
    w = s.window
    assert np.array_equal(bits(s.emulated[w].astype(np.float64)), bits(s.value[w]))


@pytest.mark.parametrize("qk_accum", ["fp32-ksteps", "two-dots"])
def test_sglang_profile_within_bound_and_paged(qk_accum: str) -> None:
    seed = 91
    case = lc.sglang_decode_case(seed, 3, 150, 32)
    s = fp4_index_logits_decode_scored(**case.kwargs, qk_accum=qk_accum)
    assert_within(s, seed)
    lens = case.kwargs["lens"]
    assert np.array_equal(s.window.sum(axis=1), np.minimum(lens, 150))
    assert np.all(np.isneginf(s.emulated[~s.window]))
    # the emulated logits are bf16 values
    e = s.emulated[s.window]
    assert np.array_equal(oracle.round_bf16(e), e)
    # paged == decode with the slots the request table gives
    req = np.array([2, 0, 1])
    req_table = np.zeros((3, 150), np.int64)
    req_table[req] = case.kwargs["slots"]
    p = fp4_index_logits_paged_scored(case.kwargs["q"], case.kwargs["weights"], req, req_table, lens,
                                     case.kwargs["table"], 64, 150, 1, qk_accum=qk_accum)
    assert np.array_equal(bits(p.emulated), bits(s.emulated))
    plain = fp4_index_logits_decode(**case.kwargs, qk_accum=qk_accum)
    assert np.array_equal(bits(plain), bits(s.emulated))


def test_sglang_wide_spans_use_exact_integer_path() -> None:
    seed = 92
    case = lc.sglang_decode_case(seed, 1, 12, 16, spread=30)
    s = fp4_index_logits_decode_scored(**case.kwargs)
    assert_within(s, seed)
    kv = oracle.dequantize_mx(oracle.pack_nibbles(case.k_codes), case.k_e8m0, "sglang-rne")
    n = int(min(case.kwargs["lens"][0], 12))
    for j in range(n):
        krow = kv[case.kwargs["slots"][0, j]]
        want = Fraction(0)
        for h in range(16):
            qk = sum((Fraction(float(a)) * Fraction(float(b)) for a, b in zip(case.q[0, h], krow)), Fraction(0))
            want += max(qk, Fraction(0)) * Fraction(float(case.weights[0, h]))
        assert float(want) == s.value[0, j], f"seed {seed} position {j}"


# ---- validation ---------------------------------------------------------------------------------


def _base() -> dict:
    return dict(lc.fp4_decode_case(5, 2, 128, 1, 16, context_lens=np.array([128, 64])).kwargs)


@pytest.mark.parametrize("mutate, error, match", [
    (lambda k: k.update(q_fp4=k["q_fp4"][..., :32]), ValueError, "head_dim must be a positive multiple of 128"),
    (lambda k: k.update(q_fp4=np.zeros((2, 1, 24, 64), np.uint8)), ValueError, "heads must be a multiple of 16"),
    (lambda k: k.update(q_fp4=np.zeros((2, 1, 144, 64), np.uint8)), ValueError, "heads must be <= 128"),
    (lambda k: k.update(kv_cache=np.zeros((6, 1, 4, 32, 16), np.uint8)), ValueError, "kv_block_size must be 64"),
    (lambda k: k.update(kv_scale=k["kv_scale"][:, :, :, :32]), ValueError, "kv_scale must have shape"),
    (lambda k: k.update(weights=k["weights"].astype(np.float32)), TypeError, "weights must be bfloat16"),
    (lambda k: k.update(weights=k["weights"][:, :8]), ValueError, "weights must have shape"),
    (lambda k: k.update(context_lens=np.array([129, 0])), ValueError, r"context_lens\[0\] = 129 must lie in"),
    (lambda k: k.update(context_lens=np.array([-1, 0])), ValueError, r"context_lens\[0\] = -1"),
    (lambda k: k.update(block_tables=k["block_tables"][:, :1]), ValueError, "block_tables has 1 columns"),
    (lambda k: k["block_tables"].__setitem__((1, 0), 10_000), ValueError, r"block_tables\[1, 0\] = 10000 is not a block"),
    (lambda k: k.update(block_tables=k["block_tables"].astype(np.float32)), TypeError, "block_tables must have an integer"),
    (lambda k: k.update(q_scale=k["q_scale"][..., :2]), ValueError, "q_scale must have shape"),
    (lambda k: k.update(q_fp4=k["q_fp4"].reshape(2, 16, 64), q_scale=k["q_scale"].reshape(2, 1, 4, 16, 4)),
     TypeError, "next_n"),
    (lambda k: k.update(weight_scale=float("inf")), ValueError, "weight_scale must be finite"),
    (lambda k: k.update(kv_block_size=16), ValueError, "kv_block_size must be 64"),
    (lambda k: k.update(out=np.zeros((2, 5), np.float32)), ValueError, "out must have shape"),
    (lambda k: k.update(bogus=1), TypeError, "unexpected keyword"),
])
def test_validation_messages(mutate, error, match) -> None:
    kwargs = _base()
    kwargs["block_tables"] = kwargs["block_tables"].copy()
    mutate(kwargs)
    with pytest.raises(error, match=match):
        logits.pa_mqa_logits_fp4(**kwargs)


def test_gap_entries_beyond_the_context_are_not_read() -> None:
    kwargs = _base()
    bt = kwargs["block_tables"].copy()
    bt[1, 1] = -1  # batch 1 has 64 tokens: its second block is never touched
    kwargs["block_tables"] = bt
    out = logits.pa_mqa_logits_fp4(**kwargs)
    assert np.isfinite(out[1, :64]).all() and np.isneginf(out[1, 64:]).all()


def test_prefill_validation() -> None:
    case = lc.fp4_prefill_case(6, 1, 100, 2, 16)
    k = dict(case.kwargs)
    bad = k["row_info"].copy()
    bad[0, 2] = 1000
    with pytest.raises(ValueError, match="local_start <= local_end <= max_seq_len"):
        logits.pa_mqa_logits_fp4_prefill(**{**k, "row_info": bad})
    bad = k["row_info"].copy()
    bad[1, 0] = 3
    with pytest.raises(ValueError, match=r"row_info\[1, 0\] = 3 must be a batch index"):
        logits.pa_mqa_logits_fp4_prefill(**{**k, "row_info": bad})
    with pytest.raises(ValueError, match="row_info must have shape"):
        logits.pa_mqa_logits_fp4_prefill(**{**k, "row_info": k["row_info"][:, :3]})


def test_sglang_exact_path_keeps_an_overflowed_even_dot_infinite() -> None:
    """sglang two-dots: the even dot rounded to float32 first, then the odd one added. An even dot
    past float32 is +inf, and inf + a finite odd dot stays inf (the fast path's add_round_f32); the
    exact path once read that inf as 0 and gave 0.0 here."""
    from mxgate.oracle.scorers import sglang as osg

    qv = np.full((2, 128), 3.0e38, np.float32)
    codes = np.zeros((1, 128), np.uint8)
    codes[:, 0::2] = 0x7  # +6 on the even dims, 0 on the odd ones
    ek = np.array([[227, 1, 1, 1]], np.uint8)  # group 0: 6 * 2^100 (finite); the others tiny
    for qk_accum in osg.QK_ACCUM:
        got = osg.slow_columns(qv, codes, ek, oracle.profiles.get("sglang-rne"), qk_accum, np.ones(2, np.float32))
        assert np.isfinite(got.qk).all() and (got.acc == np.float32(np.inf)).all(), (qk_accum, got.acc)


def _f32_round(x: Fraction) -> np.float32:
    """float32 nearest to x (ties to even): float64 rounding would round twice, so this goes
    through the exact model."""
    from mxgate.oracle import exact

    return np.uint32(exact.fraction_to_f32_bits(x)).view(np.float32)


@pytest.mark.parametrize("seed", [41, 42])
def test_sglang_exact_path_against_fractions(seed: int) -> None:
    """slow_columns on finite wide-span cells, every field from Fractions: the dot rounded once
    (float64 qk, float32 acc for fp32-ksteps), two-dots' even dot rounded to float32 first,
    sum |even| + |odd|, the per-group sum of |dot_g|, and sum_h relu(qk_h) w_h rounded once."""
    from mxgate.oracle.scorers import sglang as osg

    rng = np.random.default_rng(seed)
    H, n = 4, 3
    # exponent spans far past the fast path's 2^53 (SPAN_FAST), every dot inside float32
    qv = (rng.standard_normal((H, 128)) * 2.0 ** rng.integers(-120, 40, (H, 128))).astype(np.float32)
    codes = rng.integers(0, 16, (n, 128)).astype(np.uint8)
    ek = rng.integers(1, 180, (n, 4)).astype(np.uint8)
    w = (rng.standard_normal(H) * 2.0 ** rng.integers(-20, 20, H)).astype(np.float32)
    p = oracle.profiles.get("sglang-rne")
    k = oracle.dequantize_mx(oracle.pack_nibbles(codes), ek, p)
    assert np.isfinite(k).all() and np.isfinite(qv).all()
    F = lambda a: Fraction(float(a))  # noqa: E731 - float32 -> its exact value
    for qk_accum in osg.QK_ACCUM:
        got = osg.slow_columns(qv, codes, ek, p, qk_accum, w)
        for j in range(n):
            value = Fraction(0)
            for h in range(H):
                prods = [F(a) * F(b) for a, b in zip(qv[h], k[j])]
                even, odd, dot = sum(prods[0::2]), sum(prods[1::2]), sum(prods)
                groups = sum(abs(sum(prods[32 * g : 32 * g + 32])) for g in range(4))
                acc = _f32_round(dot) if qk_accum == osg.KSTEPS else _f32_round(F(_f32_round(even)) + odd)
                assert got.qk[h, j] == float(dot) and got.two[h, j] == float(abs(even) + abs(odd)), (seed, h, j)
                assert got.groups[h, j] == float(groups), (seed, h, j)
                assert got.acc[h, j].view(np.uint32) == acc.view(np.uint32), (seed, qk_accum, h, j)
                value += max(dot, Fraction(0)) * F(w[h])
            assert got.value[j] == float(value), (seed, j)


def test_dyadic_total_is_the_exact_sum() -> None:
    """The exact scorer paths' sum of num * 2^exp terms against Fractions (seeded 20261206), and
    rounded once to float64 as Fraction -> float rounds."""
    rng = np.random.default_rng(20261206)
    assert dyadic_total([]) == (0, 0) and f64_nearest(*dyadic_total([])) == 0.0
    for _ in range(300):
        terms = [(int(rng.integers(-(1 << 40), 1 << 40)), int(rng.integers(-300, 300)))
                 for _ in range(int(rng.integers(1, 12)))]
        num, exp = dyadic_total(terms)
        exact = sum(Fraction(n) * Fraction(2) ** e for n, e in terms)
        assert Fraction(num) * Fraction(2) ** exp == exact and exp == min(e for _, e in terms)
        assert f64_nearest(num, exp) == float(exact)
