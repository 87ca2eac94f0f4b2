"""End to end: the indexer op oracle (FP4 mode) writes Q, weights and the paged K cache; the
decode scorer oracle reads them; the result is compared with a float64 scorer on the
unquantized bf16 values the quantizers saw (after RoPE / LayerNorm), at PR #5484's end-to-end
shapes: H = 32, D = 128, kv_block 64, next_n 1 and 4.

Data (seed 5484 + next_n): q, k ~ N(0, 1) and weights ~ N(0, 0.1^2), all rounded to bf16;
LayerNorm weight 1, bias 0, epsilon 1e-6; RoPE (neox) with base 10000 at positions 0..ctx-1;
weight_scale = 128^-0.5 * 32^-0.5 = 1/64; two sequences of 1000 and 1536 tokens in random
blocks of a pool with gaps. The figures are printed (run with -s) and recorded in
docs/ops/logits.md. A second test chains the indexer's FP8 mode into the FP8 scorer.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from mxgate.oracle.ops import indexer_qk_rope_quant_and_cache
from mxgate.oracle.scorers import aiter_fp4 as logits
from mxgate.inputs import logits as lc
from mxgate.oracle.scorers import aiter_fp8 as ops_fp8
from mxgate.oracle.ops.members import frontend_values
from mxgate.oracle.scorers.topk import topk_indices

H, D, KV_BLOCK, TOPK = 32, 128, 64, 64
CTX = (1000, 1536)
WEIGHT_SCALE = 1.0 / 64.0


def _bf16(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32).astype(ml_dtypes.bfloat16)


def run_end_to_end(next_n: int, seed: int) -> dict[str, float]:
    rng = lc.rng_for(seed)
    B = len(CTX)
    total = sum(CTX)
    max_pos = max(CTX)
    inv = 10000.0 ** (-np.arange(32) / 32.0)
    angle = np.arange(max_pos)[:, None] * inv[None, :]
    cos, sin = _bf16(np.cos(angle)), _bf16(np.sin(angle))
    q = _bf16(rng.standard_normal((total, H, D)))
    k = _bf16(rng.standard_normal((total, D)))
    w = _bf16(rng.standard_normal((total, H)) * 0.1)
    blocks_per_seq = -(-max(CTX) // KV_BLOCK)
    table, num_blocks = lc.block_pool(rng, B, blocks_per_seq)
    starts = np.cumsum((0,) + CTX[:-1])
    pos = np.concatenate([np.arange(n) for n in CTX]).astype(np.int64)
    batch_of = np.repeat(np.arange(B), CTX)
    slots = (table[batch_of, pos // KV_BLOCK].astype(np.int64) * KV_BLOCK + pos % KV_BLOCK)
    op = dict(q=q, weights=w, k=k, slot_mapping=slots, norm_weight=np.ones(D, np.float32),
              norm_bias=np.zeros(D, np.float32), positions=pos, cos_cache=cos, sin_cache=sin, epsilon=1e-6,
              quant_block_size=32, scale_fmt="ue8m0", weights_scale=WEIGHT_SCALE)
    outs = indexer_qk_rope_quant_and_cache(q_out=None, weights_out=None, kv_cache=None, **op, mode="fp4",
                                           num_blocks=num_blocks)
    # the query rows: the last next_n tokens of each sequence (the MTP drafts)
    rows = np.concatenate([starts[b] + CTX[b] - next_n + np.arange(next_n) for b in range(B)])
    kwargs = dict(q_fp4=outs.q_out[rows].reshape(B, next_n, H, D // 2),
                  q_scale=outs.q_scale_out[rows].reshape((B, next_n) + outs.q_scale_out.shape[1:]),
                  kv_cache=outs.kv_cache, kv_scale=outs.kv_cache_scale, block_tables=table,
                  weights=np.ascontiguousarray(outs.weights_out[rows]), context_lens=np.array(CTX, np.int32),
                  max_seq_len=max(CTX), weight_scale=WEIGHT_SCALE)
    scored = logits.pa_mqa_logits_fp4_scored(**kwargs)
    got = logits.pa_mqa_logits_fp4(**kwargs)
    assert np.array_equal(got.view(np.uint32), scored.emulated.view(np.uint32))

    # float64 scorer on the unquantized bf16 values (what the quantizers saw)
    q32, k32 = frontend_values(q_out=None, weights_out=None, kv_cache=None, **op, mode="fp4")
    wf = w.astype(np.float64)
    ref = np.full(got.shape, -np.inf)
    for i, tok in enumerate(rows):  # a handful of query rows; tokens and heads vectorised
        b = int(batch_of[tok])
        keys = k32[starts[b]:starts[b] + CTX[b]].astype(np.float64)
        qk = q32[tok].astype(np.float64) @ keys.T  # [H, ctx]
        ref[i, :CTX[b]] = (np.maximum(qk, 0.0) * wf[tok][:, None]).sum(axis=0) * WEIGHT_SCALE
    win = scored.window
    assert np.array_equal(win, np.isfinite(ref) & (np.arange(ref.shape[1])[None, :] < np.repeat(CTX, next_n)[:, None]
                                                    - (next_n - 1 - np.tile(np.arange(next_n), B))[:, None]))
    a, r = got[win].astype(np.float64), ref[win]
    cosine = float(a @ r / (np.linalg.norm(a) * np.linalg.norm(r)))
    mine = topk_indices(got, TOPK, window=win)
    truth = topk_indices(np.where(win, ref, -np.inf), TOPK, window=win)
    overlap = float(np.mean([np.isin(t, m).mean() for t, m in zip(truth, mine)]))
    within = bool(np.all(np.abs(a - scored.value[win]) <= scored.bound[win]))
    return {"cosine": cosine, "top64_overlap": overlap, "max_abs_err_vs_f64": float(np.max(np.abs(a - r))),
            "max_abs_ref": float(np.max(np.abs(r))), "within_bound": within, "cells": int(win.sum())}


@pytest.mark.parametrize("next_n", [1, 4])
def test_end_to_end_indexer_then_scorer(next_n: int) -> None:
    seed = 5484 + next_n
    fig = run_end_to_end(next_n, seed)
    print(f"\nend-to-end H={H} D={D} kv_block={KV_BLOCK} next_n={next_n} seed={seed}: "
          f"cosine {fig['cosine']:.6f}, top-{TOPK} overlap {fig['top64_overlap']:.4f}, "
          f"max |err| {fig['max_abs_err_vs_f64']:.3e} (max |logit| {fig['max_abs_ref']:.3e}) over {fig['cells']} cells")
    assert fig["within_bound"], f"seed {seed}: the emulated order left the rigorous bound"
    assert fig["cosine"] > 0.95, f"seed {seed}: cosine {fig['cosine']}"
    assert fig["top64_overlap"] > 0.5, f"seed {seed}: overlap {fig['top64_overlap']}"


@pytest.mark.parametrize("preshuffle", [False, True], ids=["planar", "preshuffle"])
def test_end_to_end_fp8_cache_into_fp8_scorer(preshuffle: bool) -> None:
    """The indexer op in FP8 mode (per-token float32 K scale, Q scale folded into float32
    weights) feeds the FP8 scorer; within its bound, and close to float64 on the unquantized
    values."""
    seed = 5500 + int(preshuffle)
    rng = lc.rng_for(seed)
    ctx, next_n = 300, 2
    q = _bf16(rng.standard_normal((ctx, H, D)))
    k = _bf16(rng.standard_normal((ctx, D)))
    w = _bf16(rng.standard_normal((ctx, H)) * 0.1)
    inv = 10000.0 ** (-np.arange(32) / 32.0)
    angle = np.arange(ctx)[:, None] * inv[None, :]
    table, num_blocks = lc.block_pool(rng, 1, -(-ctx // KV_BLOCK))
    pos = np.arange(ctx, dtype=np.int64)
    slots = table[0, pos // KV_BLOCK].astype(np.int64) * KV_BLOCK + pos % KV_BLOCK
    op = dict(q=q, weights=w, k=k, slot_mapping=slots, norm_weight=np.ones(D, np.float32),
              norm_bias=np.zeros(D, np.float32), positions=pos, cos_cache=_bf16(np.cos(angle)),
              sin_cache=_bf16(np.sin(angle)), epsilon=1e-6, quant_block_size=D, scale_fmt="ue8m0",
              weights_scale=WEIGHT_SCALE, preshuffle=preshuffle)
    outs = indexer_qk_rope_quant_and_cache(q_out=None, weights_out=None, kv_cache=None, **op, mode="fp8",
                                           num_blocks=num_blocks, kv_block_size=KV_BLOCK)
    rows = ctx - next_n + np.arange(next_n)
    kwargs = dict(q_fp8=outs.q_out[rows].reshape(1, next_n, H, D), kv_cache=outs.kv_cache,
                  weights=np.ascontiguousarray(outs.weights_out[rows]), context_lens=np.array([ctx], np.int32),
                  block_tables=table, max_seq_len=ctx, preshuffle=preshuffle)
    scored = ops_fp8.pa_mqa_logits_fp8_scored(**kwargs)
    win = scored.window
    assert np.all(np.abs(scored.emulated[win] - scored.value[win]) <= scored.bound[win]), f"seed {seed}"
    q32, k32 = frontend_values(q_out=None, weights_out=None, kv_cache=None, **op, mode="fp8")
    ref = np.full(win.shape, -np.inf)
    for i, tok in enumerate(rows):
        qk = q32[tok].astype(np.float64) @ k32.astype(np.float64).T
        ref[i] = (np.maximum(qk, 0.0) * w[tok].astype(np.float64)[:, None]).sum(axis=0) * WEIGHT_SCALE
    a, r = scored.emulated[win].astype(np.float64), ref[win]
    cosine = float(a @ r / (np.linalg.norm(a) * np.linalg.norm(r)))
    print(f"\nend-to-end FP8 ({'preshuffled' if preshuffle else 'planar'} cache) seed={seed}: cosine {cosine:.6f}")
    assert cosine > 0.99, f"seed {seed}: cosine {cosine}"
