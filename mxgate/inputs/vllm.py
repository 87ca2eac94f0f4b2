"""Builders of valid inputs for vLLM PR #42908's scorers and quantizer kernels: dense bf16 data quantized under gfx950, scattered through the
``vllm-fp4-indexer-k`` / ``aiter-fp8-kv`` layouts into block pools with gaps, POISON-filled
unused bytes and page padding. Every array comes from ``numpy.random.Generator(PCG64(seed))``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mxgate import oracle
from mxgate.inputs import logits
from mxgate.inputs.samples import bf16_values, rng_for, spread_groups
from mxgate.oracle.formats.e2m1 import MIDPOINTS
from mxgate.oracle.geometry import GROUP, HEAD_DIM
from mxgate.oracle import layouts

MIDPOINTS_F32 = MIDPOINTS.astype(np.float32)


@dataclass
class Case:
    """kwargs: the op's (and the oracle's) keyword arguments; meta: what the case is."""

    kwargs: dict
    seed: int
    meta: dict = field(default_factory=dict)


def _quantized(rng: np.random.Generator, shape: tuple[int, ...], spread: int) -> tuple[np.ndarray, np.ndarray]:
    """bf16 N(0, 1) data, group scales up to 2^spread apart -> (packed [..., 64], e8m0 [..., 4])."""
    x = spread_groups(rng, bf16_values(rng, shape), spread)
    return oracle.quantize_mx(np.ascontiguousarray(x, dtype=np.float32), "gfx950")


def fp4_paged_case(seed: int, batch: int, next_n: int, heads: int, max_ctx: int, *, block_size: int = 64,
                   ctx2d: bool = False, spread: int = 0, page_bytes: int | None = None,
                   context_lens: np.ndarray | None = None, weight_std: float = 1.0) -> Case:
    """Paged FP4 inputs: context lengths in [0, max_ctx] (or given), block tables of distinct
    blocks from a pool with gaps, pages of ``page_bytes`` (default block_size*132, vLLM's
    allocation) whose unused bytes stay POISON. ctx2d: a [B, next_n] context_lens as vLLM's
    varlen / MTP path passes it (each row's length drawn in [0, max_ctx])."""
    rng = rng_for(seed)
    B, nn, H = batch, next_n, heads
    if context_lens is None:
        context_lens = rng.integers(0, max_ctx + 1, size=(B, nn) if ctx2d else B)
    ctx = np.asarray(context_lens, dtype=np.int64)
    longest = int(ctx.max()) if ctx.size else 0
    q_fp4, q_e8m0 = _quantized(rng, (B, nn, H, HEAD_DIM), spread)
    weights = (rng.standard_normal((B * nn, H)) * weight_std).astype(np.float32)
    blocks_per_seq = max(1, -(-max_ctx // block_size))
    table, num_blocks = logits.block_pool(rng, B, blocks_per_seq)
    layout = layouts.get("vllm-fp4-indexer-k")
    pb = block_size * 132 if page_bytes is None else page_bytes
    cache = layout.new_buffer(num_blocks=num_blocks, block_size=block_size, page_bytes=pb)
    T = max(longest, 1)
    k_packed, k_e8m0 = _quantized(rng, (B, T, HEAD_DIM), spread)
    for b in range(B):
        n = int(ctx[b].max()) if ctx.ndim == 2 else int(ctx[b])
        t = np.arange(n)
        slots = table[b, t // block_size].astype(np.int64) * block_size + t % block_size
        layout.scatter(cache, np.ascontiguousarray(k_packed[b, :n]), np.ascontiguousarray(k_e8m0[b, :n]),
                       slots=slots, block_size=block_size)
    kwargs = dict(q_fp4=q_fp4, q_e8m0=q_e8m0, kv_cache=cache, weights=weights, context_lens=ctx.astype(np.int32),
                  block_tables=table, max_context_len=max(max_ctx, 1), block_size=block_size)
    return Case(kwargs, seed, dict(batch=B, next_n=nn, heads=H, max_ctx=max_ctx, block_size=block_size,
                                   page_bytes=pb, ctx2d=ctx2d, spread=spread))


def fp4_ragged_case(seed: int, rows: int, tokens: int, heads: int, *, spread: int = 0,
                    windows: str = "random") -> Case:
    """Ragged FP4 inputs: K [tokens, 64]; row windows [ks, ke) random (some empty, some reaching
    past the ends: ks < 0, ke > tokens), or "causal" (ks = 0, ke = tokens - rows + i + 1)."""
    rng = rng_for(seed)
    q_fp4, q_e8m0 = _quantized(rng, (rows, heads, HEAD_DIM), spread)
    k_fp4, k_e8m0 = _quantized(rng, (tokens, HEAD_DIM), spread)
    weights = rng.standard_normal((rows, heads)).astype(np.float32)
    if windows == "causal":
        ks = np.zeros(rows, np.int64)
        ke = tokens - rows + np.arange(rows) + 1
    else:
        a = rng.integers(-8, tokens + 9, size=rows)
        c = rng.integers(-8, tokens + 9, size=rows)
        ks, ke = np.minimum(a, c), np.maximum(a, c)
        if rows > 1:
            ke[0] = ks[0]  # one empty window
    kwargs = dict(q_fp4=q_fp4, q_e8m0=q_e8m0, k_fp4=k_fp4, k_e8m0=k_e8m0, weights=weights,
                  cu_seqlen_ks=ks.astype(np.int32), cu_seqlen_ke=ke.astype(np.int32))
    return Case(kwargs, seed, dict(rows=rows, tokens=tokens, heads=heads, spread=spread, windows=windows))


def fp4_ragged_special_case(seed: int, rows: int, tokens: int, heads: int) -> Case:
    """A causal ragged FP4 case whose first groups carry the special scale bytes
    (``logits.special_scale_bytes``): Q 2^123 against K byte 0, Q byte 0 against K 2^123, and a
    K scale byte 255, which the kernels' decodes read as NaN (``tl.dot_scaled``) or +Inf (the
    software decode of heads % 32 != 0)."""
    case = fp4_ragged_case(seed, rows, tokens, heads, windows="causal")
    k = case.kwargs
    qc, kc = oracle.unpack_nibbles(k["q_fp4"]), oracle.unpack_nibbles(k["k_fp4"])
    qe, ke, w = k["q_e8m0"].copy(), k["k_e8m0"].copy(), k["weights"].copy()
    logits.special_scale_bytes(qc, qe, kc, ke, w, np.arange(qc.shape[0]))
    kwargs = dict(k, q_fp4=oracle.pack_nibbles(qc), q_e8m0=qe, k_fp4=oracle.pack_nibbles(kc), k_e8m0=ke, weights=w)
    return Case(kwargs, seed, dict(case.meta, special_scales=True))


def fp4_paged_special_case(seed: int, batch: int, next_n: int, heads: int, max_ctx: int, *,
                           spread: int = 40) -> Case:
    """A paged FP4 case whose batch-0 rows and tokens carry the special scale bytes
    (``logits.special_scale_bytes``), written back through the K cache layout."""
    case = fp4_paged_case(seed, batch, next_n, heads, max_ctx, spread=spread)
    k = case.kwargs
    bs, pb = case.meta["block_size"], case.meta["page_bytes"]
    layout = layouts.get("vllm-fp4-indexer-k")
    n = int(np.max(k["context_lens"][0]))
    t = np.arange(n)
    slots = k["block_tables"][0, t // bs].astype(np.int64) * bs + t % bs
    packed, ke = layout.gather(k["kv_cache"], slots=slots, block_size=bs, page_bytes=pb)
    qc, kc = oracle.unpack_nibbles(k["q_fp4"]).reshape(-1, heads, HEAD_DIM), oracle.unpack_nibbles(packed)
    qe, ke, w = k["q_e8m0"].reshape(-1, heads, HEAD_DIM // GROUP).copy(), np.array(ke), k["weights"].copy()
    logits.special_scale_bytes(qc, qe, kc, ke, w, np.arange(next_n))  # rows 0..next_n-1 score batch 0
    cache = k["kv_cache"].copy()
    layout.scatter(cache, oracle.pack_nibbles(kc), np.ascontiguousarray(ke), slots=slots, block_size=bs, page_bytes=pb)
    kwargs = dict(k, q_fp4=oracle.pack_nibbles(qc).reshape(k["q_fp4"].shape), q_e8m0=qe.reshape(k["q_e8m0"].shape),
                  kv_cache=cache, weights=w)
    return Case(kwargs, seed, dict(case.meta, special_scales=True))


def fp8_paged_case(seed: int, batch: int, next_n: int, heads: int, max_ctx: int, *, block_size: int = 64,
                   ctx2d: bool = False, variant: str = "fn") -> Case:
    """Paged FP8 inputs in the aiter-fp8-kv layout (mxgate.inputs.logits.fp8_decode_case), with vLLM's
    int32 tables and an optional 2-D context_lens."""
    base = logits.fp8_decode_case(seed, batch, max_ctx, next_n, heads, block_size=block_size, variant=variant)
    k = base.kwargs
    ctx = k["context_lens"]
    if ctx2d:
        rng = rng_for(seed + 1)
        ctx = (rng.random((batch, next_n)) * (ctx[:, None] + 1)).astype(np.int32)
        ctx[:, -1] = k["context_lens"]
    kwargs = dict(q_fp8=k["q_fp8"], kv_cache=k["kv_cache"], weights=k["weights"], context_lens=ctx.astype(np.int32),
                  block_tables=k["block_tables"].astype(np.int32), max_context_len=int(k["max_seq_len"]))
    return Case(kwargs, seed, dict(batch=batch, next_n=next_n, heads=heads, max_ctx=max_ctx, block_size=block_size,
                                   ctx2d=ctx2d, variant=variant))


def quant_rows(seed: int, rows: int, *, specials: bool = True, subnormals: bool = False,
               k_domain: bool = False) -> np.ndarray:
    """bf16 bit patterns [rows, 128]: random rows at scales 2^[-20, 20); groups whose amax is
    exactly 6*2^k (scale 2^k) holding every E2M1 midpoint, -0, small negatives; a group of
    normal values below the amax floor 6*2^-126 (unless k_domain); with ``subnormals`` a group
    of bf16 subnormals; with ``specials`` (not in k_domain) NaN and +-Inf in some groups.
    k_domain keeps every value 0 or 2^-60 <= |x| < 2^36."""
    rng = rng_for(seed)
    x = rng.standard_normal((rows, HEAD_DIM)).astype(np.float32)
    x *= np.ldexp(np.float32(1), rng.integers(-20, 20, size=(rows, 1))).astype(np.float32)
    pool = np.concatenate([MIDPOINTS_F32, -MIDPOINTS_F32, [0.0, -0.0, -0.1, 0.1, 1.0, -3.0]]).astype(np.float32)
    lo_k, hi_k = (-50, 30) if k_domain else ((-133, 30) if subnormals else (-120, 30))
    for r in range(rows):
        for g in range(4):
            if rng.random() < 0.5:
                s = np.float32(2.0 ** int(rng.integers(lo_k, hi_k)))
                group = (rng.choice(pool, GROUP) * s).astype(np.float32)
                group[int(rng.integers(GROUP))] = 6 * s
                x[r, GROUP * g:GROUP * (g + 1)] = group
    if rows > 2:
        x[0] = 0.0
        x[1] = -0.0
    if not k_domain and rows > 4:
        sign = np.where(rng.random(32) < 0.5, -1.0, 1.0)
        x[2, :32] = (sign * rng.uniform(1.0, 5.0, 32) * 2.0**-126).astype(np.float32)  # under the amax floor
        if subnormals:
            x[3, :32] = np.ldexp(np.float32(1), -133) * rng.integers(-127, 128, 32)  # bf16 subnormals
    if specials and not k_domain and rows > 8:
        x[5, 3] = np.nan
        x[5, 40] = np.inf
        x[6, 70] = -np.inf
        x[7, 96:128] = np.nan  # an all-NaN group
        x[8, 0:32] = np.inf
    bits = oracle.bf16_bits(x)
    if k_domain:
        v = oracle.bf16_to_f32(bits)
        tiny = (v != 0) & (np.abs(v) < 2.0**-60)
        bits = np.where(tiny, np.uint16(0), bits)
    return bits
