"""The oracle's vLLM PR #42908 pieces, with no vLLM checkout: the vllm-fp4-indexer-k layout, the
FP4 paged / ragged and FP8 paged scorers (exact value against brute-force Fractions, the bound
against other float32 evaluations and against a wrong value), vLLM's windows, the top-k check,
the ``vllm-rocm`` quantizer profile and the two quantizer-kernel models."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from mxgate import oracle
from mxgate.oracle import layouts, profiles
from mxgate.oracle.layouts._vllm import VllmFp4IndexerK
from mxgate.conformance.judge import check_paged_topk, compare_logits
from mxgate.oracle.scorers import vllm as lv
from mxgate.oracle.ops import quant_vllm as qv
from mxgate.inputs import vllm as vc
from mxgate.oracle.scorers.aiter_fp8 import pa_mqa_logits_fp8_scored

SEED = 20261201
L = VllmFp4IndexerK()


def rng(offset: int = 0) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64([SEED, offset]))


# ---- layout ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dims", [dict(num_blocks=3, block_size=4), dict(num_blocks=2, block_size=64, page_bytes=64 * 132),
                                  dict(num_blocks=5, block_size=16, page_bytes=16 * 68 + 40)])
def test_layout_index_map_agrees_with_scatter_and_gather(dims) -> None:
    g = rng(1)
    n = L.num_slots(**dims)
    packed = g.integers(0, 256, (n, 64), dtype=np.uint8)
    e8m0 = g.integers(0, 256, (n, 4), dtype=np.uint8)
    slots = g.permutation(n)
    buf = L.scatter(L.new_buffer(**dims), packed, e8m0, slots=slots, block_size=dims["block_size"])
    flat = buf.reshape(-1)
    off = L.index_map("packed", **dims).offset[slots]  # [n, 128] (two dims per byte)
    assert np.array_equal(flat[off[:, 0::2]], packed)
    assert np.array_equal(flat[L.index_map("e8m0", **dims).offset[slots]], e8m0)
    back = L.gather(buf, slots=slots, block_size=dims["block_size"])
    assert np.array_equal(back[0], packed) and np.array_equal(back[1], e8m0)
    regions = L.regions(**dims)
    tail = L.dims(**dims)["page_bytes"] - dims["block_size"] * 68
    assert int((regions == layouts.UNWRITTEN).sum()) == dims["num_blocks"] * tail
    assert np.all(buf.reshape(regions.shape)[regions == layouts.UNWRITTEN] == layouts.POISON)


def test_layout_page_is_the_sglang_page68_byte_order() -> None:
    """An independent layout: with page_bytes = block_size*68 the bytes equal sglang-page68's."""
    g = rng(2)
    packed = g.integers(0, 256, (40, 64), dtype=np.uint8)
    e8m0 = g.integers(0, 256, (40, 4), dtype=np.uint8)
    slots = g.permutation(48)[:40]
    ours = L.scatter(L.new_buffer(num_blocks=3, block_size=16), packed, e8m0, slots=slots, block_size=16)
    page68 = layouts.get("sglang-page68")
    theirs = page68.scatter(page68.new_buffer(num_pages=3, page_size=16), packed, e8m0, slots=slots, page_size=16)
    assert np.array_equal(ours, theirs)


def test_layout_offsets_by_formula_and_errors() -> None:
    d = dict(num_blocks=4, block_size=8, page_bytes=8 * 132)
    assert int(L.offset_of(np.array(13), np.array(7), field="packed", **d).offset) == 1 * 1056 + 5 * 64 + 3
    assert int(L.offset_of(np.array(13), np.array(2), field="e8m0", **d).offset) == 1 * 1056 + 8 * 64 + 5 * 4 + 2
    with pytest.raises(ValueError, match="page_bytes"):
        L.dims(num_blocks=1, block_size=8, page_bytes=100)
    with pytest.raises(ValueError, match="shape"):
        L.gather(np.zeros((2, 3, 4), np.uint8))


# ---- scorers: exact value --------------------------------------------------------------------


def _dequant(packed: np.ndarray, e8m0: np.ndarray) -> list[Fraction]:
    codes = oracle.unpack_nibbles(packed)
    vals = oracle.decode_e2m1(codes)
    return [Fraction(float(v)) * Fraction(2) ** (int(e8m0[i // 32]) - 127) for i, v in enumerate(vals)]


def _brute(qp, qe, w, kp, ke) -> float:
    """sum_h relu(qk_h) w_h in exact rationals, rounded once."""
    k = _dequant(kp, ke)
    total = Fraction(0)
    for h in range(qp.shape[0]):
        qk = sum(a * b for a, b in zip(_dequant(qp[h], qe[h]), k))
        if qk > 0:
            total += qk * Fraction(float(w[h]))
    return float(total)


@pytest.mark.parametrize("spread", [0, 40])  # 40: group exponents too far apart for the fast path
def test_ragged_exact_value_equals_brute_force(spread) -> None:
    case = vc.fp4_ragged_case(SEED + spread, 4, 23, 8, spread=spread)
    k = case.kwargs
    sc = lv.fp4_ragged_logits_scored(**k)
    start = np.clip(k["cu_seqlen_ks"], 0, 23)
    end = np.maximum(np.clip(k["cu_seqlen_ke"], 0, 23), start)
    for r in range(4):
        cols = np.flatnonzero(sc.window[r])
        assert cols.tolist() == list(range(start[r], end[r]))
        for t in cols:
            assert sc.value[r, t] == _brute(k["q_fp4"][r], k["q_e8m0"][r], k["weights"][r], k["k_fp4"][t], k["k_e8m0"][t])
    assert np.all(sc.value[~sc.window] == -np.inf) and np.all(sc.emulated[~sc.window] == -np.inf)


@pytest.mark.parametrize("ctx2d", [False, True])
def test_paged_exact_value_and_windows(ctx2d) -> None:
    case = vc.fp4_paged_case(SEED + 7, 2, 3, 4, 40, block_size=8, ctx2d=ctx2d, spread=2)
    k = case.kwargs
    sc = lv.fp4_paged_logits_scored(**k)
    ctx = k["context_lens"]
    packed, e8m0 = L.gather(k["kv_cache"], block_size=8)
    for r in range(6):
        b, n = divmod(r, 3)
        limit = ctx[b, n] if ctx2d else ctx[b] - (3 - 1 - n)
        cols = np.flatnonzero(sc.window[r])
        assert cols.tolist() == list(range(max(0, min(limit, 40))))
        for t in cols[:6]:
            slot = k["block_tables"][b, t // 8] * 8 + t % 8
            assert sc.value[r, t] == _brute(k["q_fp4"][b, n], k["q_e8m0"][b, n], k["weights"][r], packed[slot], e8m0[slot])


def test_paged_limits() -> None:
    assert lv.paged_limits(np.array([5, 1]), 2, 3, 4).tolist() == [3, 4, 4, 0, 0, 1]
    assert lv.paged_limits(np.array([[2, 9, -1]]), 1, 3, 4).tolist() == [2, 4, 0]
    with pytest.raises(ValueError, match="context_lens"):
        lv.paged_limits(np.zeros((2, 2), np.int32), 2, 3, 4)


def test_paged_refuses_uncovered_tokens() -> None:
    case = vc.fp4_paged_case(SEED, 1, 1, 4, 40, block_size=8, context_lens=np.array([40]))
    k = dict(case.kwargs)
    k["block_tables"] = k["block_tables"][:, :3]
    with pytest.raises(ValueError, match="block_tables"):
        lv.fp4_paged_logits_scored(**k)


# ---- scorers: the bound ----------------------------------------------------------------------


def _fp32_alternative(sc, qv_: np.ndarray, kv_: np.ndarray, w: np.ndarray, r: int, cols: np.ndarray) -> np.ndarray:
    """Another legal float32 evaluation of one row: products of float32 values summed left to
    right per dim in reverse order, heads summed pairwise in reverse order."""
    q32 = qv_.astype(np.float32)
    k32 = kv_[cols].astype(np.float32)
    qk = np.zeros((q32.shape[0], cols.size), np.float32)
    for d in range(127, -1, -1):
        qk += q32[:, d, None] * k32[None, :, d]
    p = np.maximum(qk, np.float32(0)) * w[:, None]
    level = [p[h] for h in range(p.shape[0] - 1, -1, -1)]
    while len(level) > 1:
        level = [level[i] + level[i + 1] for i in range(0, len(level) - 1, 2)] + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def test_bound_holds_for_other_orders_and_is_not_vacuous() -> None:
    case = vc.fp4_ragged_case(SEED + 3, 5, 120, 32, spread=3)
    k = case.kwargs
    sc = lv.fp4_ragged_logits_scored(**k)
    kv_ = oracle.dequantize_mx(k["k_fp4"], k["k_e8m0"], "gfx950").astype(np.float64)
    for r in range(5):
        cols = np.flatnonzero(sc.window[r])
        if not cols.size:
            continue
        qv_ = oracle.dequantize_mx(k["q_fp4"][r], k["q_e8m0"][r], "gfx950").astype(np.float64)
        alt = _fp32_alternative(sc, qv_, kv_, k["weights"][r], r, cols).astype(np.float64)
        err = np.abs(alt - sc.value[r, cols])
        assert np.all(err <= sc.bound[r, cols])
        emu = sc.emulated[r, cols].astype(np.float64)
        assert np.all(np.abs(emu - sc.value[r, cols]) <= sc.bound[r, cols])
    # not vacuous: a typical cell's bound is below 2e-3 of its value (any-order model, H = 32)
    win = sc.window & (sc.value != 0)
    assert np.median(sc.bound[win] / np.abs(sc.value[win])) < 2e-3


def test_compare_verdicts() -> None:
    sc = lv.fp4_ragged_logits_scored(**vc.fp4_ragged_case(SEED + 4, 3, 50, 8).kwargs)
    assert compare_logits(sc, sc.emulated).verdict == "exact"
    nudged = sc.emulated.copy()
    win = np.argwhere(sc.window)[0]
    nudged[tuple(win)] = np.nextafter(nudged[tuple(win)], np.float32(np.inf))
    assert compare_logits(sc, nudged).verdict in ("acceptable", "exact")
    assert compare_logits(sc, nudged).verdict == "acceptable" or sc.emulated[tuple(win)] == nudged[tuple(win)]
    broken = sc.emulated.copy()
    broken[tuple(win)] += np.float32(1.0)
    assert compare_logits(sc, broken).verdict == "fail"
    outside = sc.emulated.copy()
    outside[~sc.window] = 0.0
    assert compare_logits(sc, outside, fill=-np.inf).verdict == "fail"
    assert compare_logits(sc, outside, fill=None).verdict == "exact"


def _ones_case(heads: int, tokens: int = 4, rows: int = 2) -> dict:
    """Ragged inputs whose every code is 1.0 at scale 2^0 and every weight 1: each head's qk
    is 128, each cell 128 * heads."""
    return dict(q_fp4=np.full((rows, heads, 64), 0x22, np.uint8), q_e8m0=np.full((rows, heads, 4), 127, np.uint8),
                k_fp4=np.full((tokens, 64), 0x22, np.uint8), k_e8m0=np.full((tokens, 4), 127, np.uint8),
                weights=np.ones((rows, heads), np.float32), cu_seqlen_ks=np.zeros(rows, np.int32),
                cu_seqlen_ke=np.full(rows, tokens, np.int32))


def test_byte255_dot_scaled_head_adds_zero() -> None:
    """heads % 32 == 0 (tl.dot_scaled): a 0xFF byte makes the head's score NaN, and the relu
    tl.maximum(s, 0.0) (maxnum) makes it +0: the head adds nothing."""
    k = _ones_case(32)
    k["k_e8m0"][1, 2] = 0xFF  # token 1: every head NaN -> 0
    k["q_e8m0"][1, 0, 3] = 0xFF  # row 1, head 0: NaN on every token
    sc = lv.fp4_ragged_logits_scored(**k)
    assert sc.value.tolist() == [[4096.0, 0.0, 4096.0, 4096.0], [3968.0, 0.0, 3968.0, 3968.0]]
    assert sc.emulated.tolist() == sc.value.tolist()
    assert np.isfinite(sc.bound).all()


def test_byte255_software_decode_is_inf() -> None:
    """heads % 32 != 0 (software decode): 0xFF is exp2(128) = +Inf. Products with a nonzero
    code are +-Inf, with a +-0 code NaN; relu (maxnum) keeps +Inf and drops NaN and -Inf."""
    k = _ones_case(16, tokens=5)
    k["k_e8m0"][1, 0] = 0xFF  # token 1: 32 products +Inf in every head
    k["k_e8m0"][2, 1] = 0xFF
    k["k_fp4"][2, 16] = 0x20  # ... token 2: one +0 code in that group: NaN -> 0
    k["k_e8m0"][3, 2] = 0xFF
    k["k_fp4"][3, 32] = 0xA2  # ... token 3: one -1.0 code: +Inf + -Inf = NaN -> 0
    k["k_e8m0"][4, 3] = 0xFF
    k["k_fp4"][4, 48:64] = 0xAA  # ... token 4: every code -1.0: -Inf -> 0
    k["weights"][1, 5] = -1.0  # row 1: +Inf * 1 + +Inf * -1 = NaN on token 1
    sc = lv.fp4_ragged_logits_scored(**k)
    assert sc.value[0].tolist() == [2048.0, np.inf, 0.0, 0.0, 0.0]
    assert sc.value[1, 0] == 1792.0 and np.isnan(sc.value[1, 1]) and sc.value[1, 2:].tolist() == [0.0] * 3
    assert np.array_equal(sc.emulated, sc.value.astype(np.float32), equal_nan=True)
    assert np.isinf(sc.bound[:, 1]).all() and np.isfinite(sc.bound[:, [0, 2, 3, 4]]).all()


def test_byte0_zero_drops_the_group() -> None:
    """Byte 0 under byte0 'zero' drops the group."""
    case = vc.fp4_ragged_case(SEED + 5, 2, 10, 8)
    k = {n: (a.copy() if isinstance(a, np.ndarray) else a) for n, a in case.kwargs.items()}
    k["cu_seqlen_ks"][:] = 0
    k["cu_seqlen_ke"][:] = 10
    k["k_e8m0"][3, 1] = 0
    zero = lv.fp4_ragged_logits_scored(**k, profile="triton-dot-scaled")
    k2 = {n: (a.copy() if isinstance(a, np.ndarray) else a) for n, a in k.items()}
    k2["k_fp4"][3, 16:32] = 0  # group 1 of token 3 contributes nothing either way
    dropped = lv.fp4_ragged_logits_scored(**k2)
    assert np.array_equal(zero.value[:, 3], dropped.value[:, 3])


def test_fp8_wrapper_maps_vllm_windows() -> None:
    case = vc.fp8_paged_case(SEED + 6, 2, 2, 16, 100, block_size=32)
    k = case.kwargs
    sc = lv.fp8_paged_logits_scored(**k)
    ref = pa_mqa_logits_fp8_scored(k["q_fp8"], k["kv_cache"], k["weights"], k["context_lens"], k["block_tables"],
                                  k["max_context_len"], head_order="sequential", bound_model="any-order")
    assert np.array_equal(sc.window, ref.window) and np.array_equal(sc.value, ref.value)
    two = vc.fp8_paged_case(SEED + 6, 2, 2, 16, 100, block_size=32, ctx2d=True)
    sc2 = lv.fp8_paged_logits_scored(**two.kwargs)
    assert sc2.window.sum(axis=1).tolist() == two.kwargs["context_lens"].reshape(-1).tolist()


# ---- top-k -----------------------------------------------------------------------------------


def test_topk_check() -> None:
    sc = lv.fp4_paged_logits_scored(**vc.fp4_paged_case(SEED + 8, 2, 1, 8, 200, block_size=16,
                                                       context_lens=np.array([200, 10])).kwargs, emulate=False)
    ref = oracle.ops.topk_indices(sc.value, 16, window=sc.window)
    assert check_paged_topk(sc, ref, 16).passed
    assert ref[1, 10:].tolist() == [-1] * 6  # a row with fewer window cells than k
    bad = ref.copy()
    worst = int(np.argmin(np.where(sc.window[0], sc.value[0], np.inf)))
    bad[0, 0] = worst  # the best cell replaced by the worst one
    check = check_paged_topk(sc, bad, 16)
    assert not check.passed and check.genuine_misses == 1


# ---- the vllm-rocm quantizer profile ---------------------------------------------------------


def test_profile_element_rule() -> None:
    p = qv.VLLM_ROCM
    x = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -5.0, -0.0, -0.1, 0.1, np.nan, np.inf, -np.inf, 7.0],
                 np.float32)
    assert oracle.encode_e2m1(x, p).tolist() == [0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6, 0x8, 0xE, 0x0, 0x8, 0x0, 0x0,
                                                   0x7, 0xF, 0x7]


def test_profile_scale_rule() -> None:
    amax = np.array([0.0, 6.0, 6.0 * 2.0**-126, 1e-39, np.inf, 3.0e38], np.float32)
    assert oracle.e8m0_scale(amax, qv.VLLM_ROCM).tolist() == [1, 127, 1, 1, 254, 253]
    group = np.full((1, 32), np.nan, np.float32)  # max-num ignores NaN: an all-NaN group has amax 0
    packed, e8m0 = oracle.quantize_mx(group, qv.VLLM_ROCM)
    assert e8m0.tolist() == [[1]] and not packed.any()


def test_scale_policies_agree_on_every_bf16_amax() -> None:
    """Why the profile can use the bitwise ceil_pow2: on every finite non-negative bf16 amax it
    equals ceil(log2f(amax * fl(1/6))), the kernels' arithmetic."""
    from dataclasses import replace

    bits = np.arange(0x7F80, dtype=np.uint16)  # +0 .. largest finite
    amax = oracle.bf16_to_f32(bits)
    log2f = replace(qv.VLLM_ROCM, name="vllm-rocm-log2f", scale_policy="rceil_log2f")
    assert np.array_equal(oracle.e8m0_scale(amax, qv.VLLM_ROCM), oracle.e8m0_scale(amax, log2f))


def test_profile_resolution() -> None:
    # equal, not necessarily the same object: loading a backend that declares it registers the
    # worker's copy in this process (isolation.Description.register_profiles)
    assert qv.profile("vllm-rocm") == qv.VLLM_ROCM and profiles.get("vllm-rocm") == qv.VLLM_ROCM
    assert "vllm-rocm" in profiles.names()
    assert qv.profile("gfx950") is profiles.get("gfx950")
    with pytest.raises(ValueError):
        qv.profile("nope")


# ---- quantizer kernel models -----------------------------------------------------------------


def test_indexer_q_model() -> None:
    x = vc.quant_rows(SEED, 8).reshape(2, 4, 128)
    w = rng(9).standard_normal((2, 4)).astype(np.float32)
    packed, e8m0, w_out = qv.indexer_q_mxfp4(x, w, 0.125, 3.0)
    want_p, want_e = oracle.quantize_mx(oracle.bf16_to_f32(x), qv.VLLM_ROCM)
    # finite pairs: the identity rotation changes nothing
    assert np.array_equal(e8m0[0, 0], want_e[0, 0]) and np.array_equal(packed[0, :3], want_p[0, :3])
    assert np.array_equal(w_out, (w * np.float32(0.125)).astype(np.float32) * np.float32(3.0))
    y = np.zeros((1, 1, 128), np.uint16)
    y[0, 0, 64:66] = oracle.bf16_bits(np.array([3.0, np.inf], np.float32))  # a rope pair with an Inf partner
    y[0, 0, 0:2] = oracle.bf16_bits(np.array([3.0, np.inf], np.float32))  # the same in a NoPE pair
    p, e, _ = qv.indexer_q_mxfp4(y, np.ones((1, 1), np.float32), 1.0, 1.0)
    assert p[0, 0, 32] == 0x70  # rope: 3*1 - inf*0 = NaN -> 0x0 (low), inf -> 0x7 (high), scale 254
    assert e[0, 0, 2] == 254 and e[0, 0, 0] == 254
    assert p[0, 0, 0] == 0x70  # NoPE: 3 / 2^127 -> 0x0, inf -> 0x7


def test_k_insert_model() -> None:
    k = vc.quant_rows(SEED, 12, k_domain=True)
    slots = np.array([5, 0, -1, 17, 9, 3, 30, 31, 16, -1, 2, 8])
    cache = L.new_buffer(num_blocks=3, block_size=16, page_bytes=16 * 132)
    out = qv.k_insert_mxfp4(k, slots, cache, block_size=16)
    packed, e8m0 = oracle.quantize_mx(oracle.bf16_to_f32(k), qv.VLLM_ROCM)
    want = L.scatter(cache.copy(), packed, e8m0, slots=slots, block_size=16)
    assert np.array_equal(out, want)
    assert np.array_equal(cache, L.new_buffer(num_blocks=3, block_size=16, page_bytes=16 * 132))  # input kept
    bad = k.copy()
    bad[0, 0] = oracle.bf16_bits(np.array([2.0**40], np.float32))[0]
    with pytest.raises(ValueError, match="2\\^36"):
        qv.k_insert_mxfp4(bad, slots, cache, block_size=16)


def test_cases_are_deterministic() -> None:
    a = vc.fp4_paged_case(11, 2, 2, 8, 50, block_size=16)
    b = vc.fp4_paged_case(11, 2, 2, 8, 50, block_size=16)
    for name, value in a.kwargs.items():
        assert np.array_equal(value, b.kwargs[name]) if isinstance(value, np.ndarray) else value == b.kwargs[name]
    assert np.array_equal(vc.quant_rows(3, 10), vc.quant_rows(3, 10))
