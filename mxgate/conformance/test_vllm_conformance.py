"""Conformance of vLLM PR #42908's ROCm Triton kernels (mxgate.kernels.vllm_triton) for any
backend implementing their ops: the FP4 paged and ragged scorers, the FP8 paged scorer, the
fused top-k variants, the MXFP4 Q kernel and the MXFP4 K-cache insert.

Scorers: ``exact`` when every window cell is bit-equal to the oracle's emulated order
(mxgate.oracle.scorers.vllm: qk rounded once, relu, fl(relu * w), heads in sequence) and,
with ``clean_logits``, every other cell is -inf; ``acceptable`` when the window cells lie inside
the rigorous bound (any float32 order of the 128 products and of the heads); else ``fail``.
Without ``clean_logits`` the kernels leave cells outside the window as torch.empty gives them:
those are not judged. Top-k: sets, ties and near-ties inside the bound accepted (``exact`` when
the set is the oracle's). Quantizer kernels: every output byte against the oracle under the
op's declared profile (``vllm-rocm``, registered by mxgate.oracle.ops.quant_vllm), untouched cache bytes
included. Configs follow the PR's own test matrix (block sizes 32/64, next_n 1..6, heads
32/64, varlen), scaled to the CPU interpreter; seeds are in every config id.
"""

from __future__ import annotations

import numpy as np
import pytest

from mxgate.conformance.hypothesis_settings import search
from mxgate.conformance.judge import ACCEPTABLE, EXACT, FAIL, UNSUPPORTED, Verdict, check_paged_topk, combine, compare_arrays
from mxgate.conformance.judge import compare_logits
from mxgate.conformance.judge import logits_verdict as _logits_verdict, topk_verdict as _topk_verdict
from mxgate import oracle
from mxgate.inputs import vllm as vc
from mxgate.inputs.strategies import vllm_paged_params, vllm_q_row_params, vllm_ragged_params
from mxgate.oracle.scorers import vllm as lv
from mxgate.oracle.ops import quant_vllm as qv
from mxgate.kernels.vllm_triton import FP4_PAGED, FP4_RAGGED, FP8_PAGED, K_STORE, Q_QUANT, TILE_TOPK, TOPK  # noqa: E402

# (batch, next_n, heads, max_ctx, block_size, ctx2d, spread, page_bytes): the PR's matrix
# (block 32/64, next_n 1, 2, 4, 5, 6, heads 32/64, dense and varlen) at avg_kv 192 / 448 scaled
# contexts, plus wide group-scale spreads and packed / padded pages.
PAGED_CONFIGS = [
    (4, 1, 32, 396, 64, False, 0, None),
    (4, 2, 64, 396, 32, False, 0, None),
    (4, 4, 32, 755, 64, False, 0, None),
    (3, 5, 64, 300, 32, False, 3, 32 * 68),
    (2, 6, 32, 396, 64, False, 0, 64 * 68),
    (6, 1, 64, 396, 64, True, 0, None),
    (3, 3, 32, 300, 16, True, 16, None),
    (2, 1, 64, 130, 64, False, 40, 64 * 140),
]
# (rows, tokens, heads, spread, windows): heads % 32 == 0 -> tl.dot_scaled, else software decode
RAGGED_CONFIGS = [(7, 19, 8, 0, "random"), (16, 300, 32, 0, "random"), (12, 260, 64, 3, "causal"),
                  (9, 200, 16, 16, "random"), (5, 130, 4, 0, "causal")]
FP8_CONFIGS = [(4, 1, 32, 396, 64, False), (4, 2, 64, 300, 32, False), (3, 5, 32, 300, 64, False),
               (6, 1, 64, 396, 32, True)]
# (batch, next_n, heads, max_ctx, block_size, k)
# inside both wrappers' limits: top-k <= 256 (streaming), at most 8 tiles of max(1, cdiv(2k, block)) blocks
TOPK_CONFIGS = [(3, 1, 64, 400, 64, 32), (2, 2, 32, 250, 32, 16), (4, 1, 32, 256, 64, 64), (2, 1, 64, 700, 64, 128)]
KNOBS = [{"VLLM_ROCM_FP4_INDEXER_SEGMENT_GROUP_PROGS": "2"}, {"VLLM_ROCM_FP4_INDEXER_TILE_CHUNKS": "2"}]
RAGGED_KNOBS = [{"VLLM_ROCM_FP4_INDEXER_PREFILL_PERSISTENT_K_PROGS": "2"}]
# (rows, kv tokens, heads): the tl.dot_scaled path and the software decode (heads % 32 != 0)
RAGGED_SPECIAL_CONFIGS = [(4, 40, 32), (4, 40, 16)]

SUBNORMALS_ON_CPU = (
    "Triton 3.9's CPU interpreter converts bf16 subnormals to float32 wrongly (0x0016 -> 0x00300000, "
    "torch gives 0x00160000), so the Q kernel's bf16 loads of subnormals cannot be judged here "
    "(docs/findings/vllm.md, section 4); this config runs on --device cuda"
)


def _id(*parts: object) -> str:
    return "_".join(str(p) for p in parts)


def _judge_scorer(run, scored, kwargs: dict) -> Verdict:
    """Two calls: clean_logits (cells outside the window must be -inf) and not (not judged)."""
    clean = _logits_verdict(compare_logits(scored, np.asarray(run(**kwargs, clean_logits=True)), fill=-np.inf))
    dirty = _logits_verdict(compare_logits(scored, np.asarray(run(**kwargs, clean_logits=False)), fill=None))
    both = combine([clean, dirty])
    reasons = list(dict.fromkeys(v.reason for v in (clean, dirty) if v.reason and v.verdict == both.verdict))
    labels = ("clean_logits", "clean_logits=False")
    if len(reasons) == 2:  # say which call each belongs to
        reasons = [f"{label}: {v.reason}" for label, v in zip(labels, (clean, dirty)) if v.verdict == both.verdict]
    return Verdict(both.verdict, "; ".join(reasons), mismatches=both.mismatches, total=both.total,
                   first_mismatch=both.first_mismatch)


def _profile_name(op, override: str | None) -> str:
    return override or op.profile


# ---- FP4 paged -------------------------------------------------------------------------------


def _paged_id(cfg: tuple) -> str:
    B, nn, H, ctx, bs, ctx2d, spread, pb = cfg
    return _id(f"b{B}", f"n{nn}", f"h{H}", f"ctx{ctx}", f"blk{bs}", "varlen" if ctx2d else "dense",
               f"spread{spread}", f"page{pb or bs * 132}")


@pytest.mark.mxgate_op(FP4_PAGED)
@pytest.mark.parametrize("cfg", PAGED_CONFIGS, ids=_paged_id)
def test_fp4_paged(backend, record, profile_override, cfg, oracle_on_device) -> None:
    op = backend.op(FP4_PAGED)
    prof = _profile_name(op, profile_override)
    B, nn, H, ctx, bs, ctx2d, spread, pb = cfg
    seed = 42900 + B * 101 + nn * 13 + H + ctx + bs + spread + int(ctx2d)
    case = vc.fp4_paged_case(seed, B, nn, H, ctx, block_size=bs, ctx2d=ctx2d, spread=spread, page_bytes=pb)
    scored = oracle_on_device(lv.fp4_paged_logits_scored)(**case.kwargs, profile=qv.profile(prof))
    record(FP4_PAGED, f"{_paged_id(cfg)}_seed{seed}", _judge_scorer(op.run, scored, case.kwargs), seed=seed,
           profile=prof)


@pytest.mark.mxgate_op(FP4_PAGED)
def test_fp4_paged_special_scale_bytes(backend, record, profile_override, oracle_on_device) -> None:
    """Scale bytes 0 and 255 and a 2^123 x 2^-127 product (tl.dot_scaled reads 255 as NaN)."""
    op = backend.op(FP4_PAGED)
    prof = _profile_name(op, profile_override)
    seed = 43950
    case = vc.fp4_paged_special_case(seed, 2, 2, 32, 96)
    scored = oracle_on_device(lv.fp4_paged_logits_scored)(**case.kwargs, profile=qv.profile(prof))
    record(FP4_PAGED, f"b2_n2_h32_ctx96_scale-bytes-0-250-255_seed{seed}", _judge_scorer(op.run, scored, case.kwargs),
           seed=seed, profile=prof)


@pytest.mark.mxgate_op(FP4_PAGED)
@pytest.mark.parametrize("knobs", KNOBS, ids=["segment2", "tilechunks2"])
def test_fp4_paged_launch_knobs(backend, record, profile_override, knobs, oracle_on_device) -> None:
    """The v2 wrapper's alternative kernels (segment / tiled), chosen by its environment knobs;
    a revision without them runs the default kernel (the config then repeats that one)."""
    op = backend.op(FP4_PAGED)
    prof = _profile_name(op, profile_override)
    seed = 42990 + len(next(iter(knobs)))
    case = vc.fp4_paged_case(seed, 3, 2, 64, 700, block_size=64)
    scored = oracle_on_device(lv.fp4_paged_logits_scored)(**case.kwargs, profile=qv.profile(prof))
    got = np.asarray(op.run(**case.kwargs, clean_logits=False, knobs=knobs))
    name = "-".join(f"{k}={v}" for k, v in knobs.items())
    record(FP4_PAGED, f"knobs_{name}_seed{seed}", _logits_verdict(compare_logits(scored, got, fill=None)), seed=seed,
           profile=prof)


def _hypothesis(record, op_name: str, prof: str, strategy, judge) -> None:
    """Run ``judge(params) -> (config id, seed, Verdict)`` under Hypothesis; record the shrunk
    failing example, or one summary row for all the examples."""
    seen, failed = search(strategy, judge, lambda result: not result[2].passed)
    if failed:
        cid, seed, verdict = seen[-1]  # Hypothesis replays the shrunk example last
        record(op_name, f"hypothesis_{cid}_seed{seed}", verdict, seed=seed, profile=prof)
        return
    worst = combine([v for _, _, v in seen]) if seen else Verdict(EXACT)
    reason = f"{len(seen)} examples, every one exact"
    if worst.verdict == ACCEPTABLE:
        reason = f"{len(seen)} examples; " + next(v.reason for _, _, v in seen if v.verdict == ACCEPTABLE)
    elif worst.verdict == FAIL:
        reason = worst.reason
    record(op_name, "hypothesis", Verdict(worst.verdict, reason, total=worst.total), profile=prof)


@pytest.mark.mxgate_op(FP4_PAGED)
def test_fp4_paged_hypothesis(backend, record, profile_override, tier, oracle_on_device) -> None:
    if tier == "quick":
        pytest.skip("Hypothesis cases run from the default tier on")
    op = backend.op(FP4_PAGED)
    prof = _profile_name(op, profile_override)

    def judge(params):
        seed, B, nn, H, bs, ctx2d, ctx, spread = params
        lens = np.array(ctx, np.int64).reshape((B, nn) if ctx2d else (B,))
        case = vc.fp4_paged_case(seed, B, nn, H, 200, block_size=bs, ctx2d=ctx2d, spread=spread, context_lens=lens)
        scored = oracle_on_device(lv.fp4_paged_logits_scored)(**case.kwargs, profile=qv.profile(prof))
        cid = _id(f"b{B}", f"n{nn}", f"h{H}", f"blk{bs}", "varlen" if ctx2d else "dense", f"spread{spread}",
                  "lens" + "-".join(map(str, ctx)))
        return cid, seed, _judge_scorer(op.run, scored, case.kwargs)

    _hypothesis(record, FP4_PAGED, prof, vllm_paged_params(), judge)


# ---- FP4 ragged ------------------------------------------------------------------------------


def _ragged_id(cfg: tuple) -> str:
    S, N, H, spread, windows = cfg
    return _id(f"rows{S}", f"kv{N}", f"h{H}", "dot_scaled" if H % 32 == 0 else "decode", f"spread{spread}", windows)


@pytest.mark.mxgate_op(FP4_RAGGED)
@pytest.mark.parametrize("cfg", RAGGED_CONFIGS, ids=_ragged_id)
def test_fp4_ragged(backend, record, profile_override, cfg, oracle_on_device) -> None:
    op = backend.op(FP4_RAGGED)
    prof = _profile_name(op, profile_override)
    S, N, H, spread, windows = cfg
    seed = 43100 + S * 7 + N + H + spread + len(windows)
    case = vc.fp4_ragged_case(seed, S, N, H, spread=spread, windows=windows)
    scored = oracle_on_device(lv.fp4_ragged_logits_scored)(**case.kwargs, profile=qv.profile(prof))
    record(FP4_RAGGED, f"{_ragged_id(cfg)}_seed{seed}", _judge_scorer(op.run, scored, case.kwargs), seed=seed,
           profile=prof)


@pytest.mark.mxgate_op(FP4_RAGGED)
@pytest.mark.parametrize("cfg", RAGGED_SPECIAL_CONFIGS,
                         ids=lambda c: _id(f"rows{c[0]}", f"kv{c[1]}", f"h{c[2]}",
                                           "dot_scaled" if c[2] % 32 == 0 else "decode", "scale-bytes-0-250-255"))
def test_fp4_ragged_special_scale_bytes(backend, record, profile_override, cfg, oracle_on_device) -> None:
    """Scale bytes 0 and 255 and a 2^123 x 2^-127 product, which finite quantized data never has."""
    op = backend.op(FP4_RAGGED)
    prof = _profile_name(op, profile_override)
    S, N, H = cfg
    seed = 43900 + S + N + H
    case = vc.fp4_ragged_special_case(seed, S, N, H)
    scored = oracle_on_device(lv.fp4_ragged_logits_scored)(**case.kwargs, profile=qv.profile(prof))
    name = _id(f"rows{S}", f"kv{N}", f"h{H}", "dot_scaled" if H % 32 == 0 else "decode", "scale-bytes-0-250-255")
    record(FP4_RAGGED, f"{name}_seed{seed}", _judge_scorer(op.run, scored, case.kwargs), seed=seed, profile=prof)


@pytest.mark.mxgate_op(FP4_RAGGED)
@pytest.mark.parametrize("knobs", RAGGED_KNOBS, ids=["persistent2"])
def test_fp4_ragged_launch_knobs(backend, record, profile_override, knobs, oracle_on_device) -> None:
    """v2's persistent prefill kernel (its knob; used only without clean_logits, heads % 32 == 0)."""
    op = backend.op(FP4_RAGGED)
    prof = _profile_name(op, profile_override)
    seed = 43190
    case = vc.fp4_ragged_case(seed, 10, 600, 32, windows="random")
    scored = oracle_on_device(lv.fp4_ragged_logits_scored)(**case.kwargs, profile=qv.profile(prof))
    got = np.asarray(op.run(**case.kwargs, clean_logits=False, knobs=knobs))
    record(FP4_RAGGED, f"knobs_persistent2_seed{seed}", _logits_verdict(compare_logits(scored, got, fill=None)), seed=seed,
           profile=prof)


@pytest.mark.mxgate_op(FP4_RAGGED)
def test_fp4_ragged_hypothesis(backend, record, profile_override, tier, oracle_on_device) -> None:
    if tier == "quick":
        pytest.skip("Hypothesis cases run from the default tier on")
    op = backend.op(FP4_RAGGED)
    prof = _profile_name(op, profile_override)
    def judge(p):
        seed, S, N, H, spread, windows = p
        if windows == "causal" and S > N:
            windows = "random"
        case = vc.fp4_ragged_case(seed, S, N, H, spread=spread, windows=windows)
        scored = oracle_on_device(lv.fp4_ragged_logits_scored)(**case.kwargs, profile=qv.profile(prof))
        return _ragged_id((S, N, H, spread, windows)), seed, _judge_scorer(op.run, scored, case.kwargs)

    _hypothesis(record, FP4_RAGGED, prof, vllm_ragged_params(), judge)


# ---- FP8 paged -------------------------------------------------------------------------------


@pytest.mark.mxgate_op(FP8_PAGED)
@pytest.mark.parametrize("cfg", FP8_CONFIGS, ids=lambda c: _id(f"b{c[0]}", f"n{c[1]}", f"h{c[2]}", f"ctx{c[3]}",
                                                                f"blk{c[4]}", "varlen" if c[5] else "dense"))
def test_fp8_paged(backend, record, profile_override, cfg, oracle_on_device) -> None:
    """Q and K e4m3 in the variant of the op's profile (fn for gfx950, fnuz for aiter-gfx942)."""
    op = backend.op(FP8_PAGED)
    prof = _profile_name(op, profile_override)
    variant = qv.profile(prof).fp8_variant
    B, nn, H, ctx, bs, ctx2d = cfg
    seed = 43300 + B + nn * 11 + H + ctx + bs + int(ctx2d)
    case = vc.fp8_paged_case(seed, B, nn, H, ctx, block_size=bs, ctx2d=ctx2d, variant=variant)
    scored = oracle_on_device(lv.fp8_paged_logits_scored)(**case.kwargs, variant=variant)
    cid = _id(f"b{B}", f"n{nn}", f"h{H}", f"ctx{ctx}", f"blk{bs}", "varlen" if ctx2d else "dense", variant)
    record(FP8_PAGED, f"{cid}_seed{seed}", _judge_scorer(op.run, scored, case.kwargs), seed=seed, profile=prof)


# ---- fused top-k -----------------------------------------------------------------------------


@pytest.mark.mxgate_op(TOPK)
@pytest.mark.parametrize("cfg", TOPK_CONFIGS, ids=lambda c: _id(f"b{c[0]}", f"n{c[1]}", f"h{c[2]}", f"ctx{c[3]}",
                                                                f"blk{c[4]}", f"k{c[5]}"))
def test_fp4_paged_topk(backend, record, profile_override, cfg, oracle_on_device) -> None:
    _topk(backend, record, profile_override, cfg, TOPK, oracle_on_device)


@pytest.mark.mxgate_op(TILE_TOPK)
@pytest.mark.parametrize("cfg", TOPK_CONFIGS, ids=lambda c: _id(f"b{c[0]}", f"n{c[1]}", f"h{c[2]}", f"ctx{c[3]}",
                                                                f"blk{c[4]}", f"k{c[5]}"))
def test_fp4_paged_tile_topk(backend, record, profile_override, cfg, oracle_on_device) -> None:
    _topk(backend, record, profile_override, cfg, TILE_TOPK, oracle_on_device)


def _topk(backend, record, profile_override, cfg: tuple, name: str, oracle_on_device) -> None:
    op = backend.op(name)
    prof = _profile_name(op, profile_override)
    B, nn, H, ctx, bs, k = cfg
    seed = 43500 + B + nn + H + ctx + bs + k
    case = vc.fp4_paged_case(seed, B, nn, H, ctx, block_size=bs)
    scored = oracle_on_device(lv.fp4_paged_logits_scored)(**case.kwargs, profile=qv.profile(prof), emulate=False)
    got = np.asarray(op.run(**case.kwargs, topk=k))
    if got.shape != (B * nn, k):
        verdict = Verdict(FAIL, f"indices shape {got.shape} != ({B * nn}, {k})")
    else:
        verdict = _topk_verdict(check_paged_topk(scored, got, k))
    cid = _id(f"b{B}", f"n{nn}", f"h{H}", f"ctx{ctx}", f"blk{bs}", f"k{k}")
    record(name, f"{cid}_seed{seed}", verdict, seed=seed, profile=prof)


# ---- quantizer kernels -----------------------------------------------------------------------

Q_CONFIGS = [("ties-specials", 8, 4, False), ("ties-wide", 3, 64, False), ("bf16-subnormals", 4, 4, True)]


@pytest.mark.mxgate_op(Q_QUANT)
@pytest.mark.parametrize("cfg", Q_CONFIGS, ids=lambda c: f"{c[0]}-T{c[1]}-H{c[2]}")
def test_indexer_q_mxfp4(backend, record, profile_override, device, cfg) -> None:
    op = backend.op(Q_QUANT)
    prof = _profile_name(op, profile_override)
    label, T, H, subnormals = cfg
    seed = 43700 + T * H + int(subnormals)
    cid = f"{label}-T{T}-H{H}_seed{seed}"
    if subnormals and device == "cpu":
        record(Q_QUANT, cid, Verdict(UNSUPPORTED, SUBNORMALS_ON_CPU), seed=seed, profile=prof)
        pytest.skip(f"not supported here: {SUBNORMALS_ON_CPU}")
    x = vc.quant_rows(seed, T * H, subnormals=subnormals).reshape(T, H, 128)
    w = np.random.Generator(np.random.PCG64(seed)).standard_normal((T, H)).astype(np.float32)
    got = op.run(x, w, 0.08838834764831845, 0.125)
    want = qv.indexer_q_mxfp4(x, w, 0.08838834764831845, 0.125, profile_=qv.profile(prof))
    verdict = combine([compare_arrays(e, np.asarray(a), n) for e, a, n in zip(want, got, ("packed", "e8m0", "weights_out"))])
    record(Q_QUANT, cid, verdict, seed=seed, profile=prof)


@pytest.mark.mxgate_op(Q_QUANT)
def test_indexer_q_mxfp4_hypothesis(backend, record, profile_override, tier) -> None:
    """Arbitrary bf16 bit patterns per group (NaN and Inf included, subnormals excluded: see
    SUBNORMALS_ON_CPU), at every group scale."""
    if tier == "quick":
        pytest.skip("Hypothesis cases run from the default tier on")
    op = backend.op(Q_QUANT)
    prof = _profile_name(op, profile_override)
    def judge(p):
        seed, row, shift = p
        x = vc.quant_rows(seed, 4, specials=False).reshape(1, 4, 128)
        x[0, 0] = np.array(row, np.uint16)
        g = np.random.Generator(np.random.PCG64(seed))
        x[0, 1, :32] = oracle.bf16_bits(np.float32(2.0**shift) * vc.MIDPOINTS_F32[g.integers(0, 7, 32)]
                                           * np.where(g.random(32) < 0.5, -1, 1).astype(np.float32))
        w = g.standard_normal((1, 4)).astype(np.float32)
        got = op.run(x, w, 1.0, 1.0)
        want = qv.indexer_q_mxfp4(x, w, 1.0, 1.0, profile_=qv.profile(prof))
        v = combine([compare_arrays(e, np.asarray(a), n) for e, a, n in zip(want, got, ("packed", "e8m0", "weights_out"))])
        return f"shift{shift}", seed, v

    _hypothesis(record, Q_QUANT, prof, vllm_q_row_params(), judge)


K_CONFIGS = [(40, 16, None), (40, 64, 64 * 68), (70, 32, 32 * 140)]


@pytest.mark.mxgate_op(K_STORE)
@pytest.mark.parametrize("cfg", K_CONFIGS, ids=lambda c: f"T{c[0]}-blk{c[1]}-page{c[2] or c[1] * 132}")
def test_k_store(backend, record, profile_override, cfg) -> None:
    """Rows with every midpoint and -0 at many scales, slots out of order across blocks, some
    rows skipped (slot -1); every byte of the cache, the never-written page tails included."""
    op = backend.op(K_STORE)
    prof = _profile_name(op, profile_override)
    T, bs, pb = cfg
    seed = 43900 + T + bs
    rng = np.random.Generator(np.random.PCG64(seed))
    k = vc.quant_rows(seed, T, k_domain=True)
    blocks = -(-T // bs) + 2
    slots = rng.permutation(blocks * bs)[:T].astype(np.int64)
    slots[rng.random(T) < 0.1] = -1
    cache = oracle.layouts.get("vllm-fp4-indexer-k").new_buffer(num_blocks=blocks, block_size=bs, page_bytes=pb or bs * 132)
    got = np.asarray(op.run(k, slots, cache, block_size=bs))
    want = qv.k_insert_mxfp4(k, slots, cache, block_size=bs, profile_=qv.profile(prof))
    record(K_STORE, f"T{T}-blk{bs}-page{cache.shape[1]}_seed{seed}", compare_arrays(want, got, "cache"), seed=seed,
           profile=prof)

