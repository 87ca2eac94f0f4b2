"""Builders of valid scorer inputs from dense data: quantize, then scatter through the layouts
(the same index maps the kernels use), into block pools with gaps and POISON-filled unused bytes.

The tests, the conformance suite, the benchmark and the end-to-end test share them, so every
backend sees the same bytes for a given seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mxgate import oracle
from mxgate.inputs.samples import bf16_values, rng_for, spread_groups
from mxgate.oracle import layouts
from mxgate.oracle.geometry import GROUP, HEAD_DIM, KV_BLOCK


@dataclass
class Fp4Case:
    """Arguments for the FP4 scorers plus the logical (unscattered) arrays they were built from.

    kwargs: keyword arguments of ``pa_mqa_logits_fp4`` (decode) or ``..._prefill``.
    q_codes [rows, H, D] and q_e8m0 [rows, H, G]; k_codes [B, T, D] and k_e8m0 [B, T, G] (token
    t of batch b, dense); weights float32 [rows, H] (bf16 values); windows (batch, start, end).
    """

    kwargs: dict
    q_codes: np.ndarray
    q_e8m0: np.ndarray
    k_codes: np.ndarray
    k_e8m0: np.ndarray
    weights: np.ndarray
    weight_scale: np.float32
    batch: np.ndarray
    start: np.ndarray
    end: np.ndarray
    seed: int | None = None
    notes: dict = field(default_factory=dict)


def quantize_groups(x: np.ndarray, profile: str = "gfx950") -> tuple[np.ndarray, np.ndarray]:
    """float32 [..., D] -> (codes uint8 [..., D], e8m0 [..., D/32]) under the profile."""
    packed, e8m0 = oracle.quantize_mx(np.ascontiguousarray(x, dtype=np.float32), profile)
    return oracle.unpack_nibbles(packed), e8m0


def block_pool(rng: np.random.Generator, batch: int, blocks_per_seq: int, *,
               gaps: bool = True) -> tuple[np.ndarray, int]:
    """A block table [batch, blocks_per_seq] of distinct physical blocks drawn from a larger pool
    (gaps: unused blocks in between), in random order. -> (table int32, num_blocks)."""
    need = batch * blocks_per_seq
    num_blocks = need + (max(2, need // 2) if gaps else 0)
    phys = rng.permutation(num_blocks)[:need] if gaps else np.arange(need)
    return phys.reshape(batch, blocks_per_seq).astype(np.int32), num_blocks


def scatter_kv(k_codes: np.ndarray, k_e8m0: np.ndarray, table: np.ndarray, lens: np.ndarray,
               num_blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """Dense K [B, T, D] codes + [B, T, G] scales -> (kv_cache, kv_scale) POISON-filled pools
    holding token t of batch b at block table[b, t // 64], position t % 64, for t < lens[b]."""
    B, T, D = k_codes.shape
    kv_l = layouts.get("aiter-fp4-kv")
    ks_l = layouts.get("aiter-fp4-kv-scale")
    kv = kv_l.new_buffer(num_blocks=num_blocks, head_dim=D)
    ks = ks_l.new_buffer(num_blocks=num_blocks, head_dim=D)
    t = np.arange(T)
    for b in range(B):
        n = int(lens[b])
        if n == 0:
            continue
        slots = table[b, t[:n] // KV_BLOCK].astype(np.int64) * KV_BLOCK + t[:n] % KV_BLOCK
        kv_l.scatter(kv, oracle.pack_nibbles(k_codes[b, :n]), slots=slots)
        ks_l.scatter(ks, np.ascontiguousarray(k_e8m0[b, :n]), slots=slots)
    return kv, ks


def scatter_q(q_codes: np.ndarray, q_e8m0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Logical Q [rows, H, D] codes + [rows, H, G] scales -> (q_fp4 [rows, H, D/2], q_scale
    [rows, k_tiles, 4, 16, QS_PAD]) through the aiter-fp4-q / -q-scale layouts."""
    rows, H, D = q_codes.shape
    q_l = layouts.get("aiter-fp4-q")
    qs_l = layouts.get("aiter-fp4-q-scale")
    q = q_l.new_buffer(num_tokens=rows, num_heads=H, head_dim=D)
    qs = qs_l.new_buffer(num_tokens=rows, num_heads=H, head_dim=D)
    q_l.scatter(q, oracle.pack_nibbles(q_codes))
    qs_l.scatter(qs, np.ascontiguousarray(q_e8m0), num_heads=H)
    return q, qs


def fp4_decode_case(seed: int, batch: int, max_ctx: int, next_n: int, heads: int, head_dim: int = HEAD_DIM, *,
                    context_lens: np.ndarray | None = None, spread: int = 0, gaps: bool = True,
                    weight_scale: float = 1.5, weight_std: float = 0.1, shape4d: bool = True,
                    q: np.ndarray | None = None, k: np.ndarray | None = None,
                    weights: np.ndarray | None = None) -> Fp4Case:
    """A decode case: random bf16 Q/K (or the given float32 q [B, next_n, H, D], k [B, T, D]),
    quantized under gfx950, context lengths uniform in [0, max_ctx] unless given, block tables
    of random distinct blocks with gaps; ``spread`` puts group scales up to 2^spread apart."""
    rng = rng_for(seed)
    B, H, D = batch, heads, head_dim
    if context_lens is None:
        context_lens = rng.integers(0, max_ctx + 1, size=B)
    lens = np.asarray(context_lens, dtype=np.int64)
    T = max(int(lens.max()) if B else 0, 1)
    if q is None:
        q = spread_groups(rng, bf16_values(rng, (B, next_n, H, D)), spread)
    if k is None:
        k = spread_groups(rng, bf16_values(rng, (B, T, D)), spread)
    if weights is None:
        weights = bf16_values(rng, (B * next_n, H), weight_std)
    q_codes, q_e8m0 = quantize_groups(q.reshape(B * next_n, H, D))
    k_codes, k_e8m0 = quantize_groups(k[:, :T])
    table, num_blocks = block_pool(rng, B, max(1, -(-max_ctx // KV_BLOCK)), gaps=gaps)
    kv, ks = scatter_kv(k_codes, k_e8m0, table, lens, num_blocks)
    q_fp4, q_scale = scatter_q(q_codes, q_e8m0)
    if shape4d:
        q_fp4 = q_fp4.reshape(B, next_n, H, D // 2)
        q_scale = q_scale.reshape((B, next_n) + q_scale.shape[1:])
    w_bits = oracle.bf16_bits(weights.astype(np.float32))
    ws = np.float32(weight_scale)
    kwargs = dict(q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv, kv_scale=ks, block_tables=table,
                  weights=w_bits, context_lens=lens.astype(np.int32), max_seq_len=max(max_ctx, 1),
                  weight_scale=float(ws))
    if not shape4d:
        kwargs["next_n"] = next_n
    n = np.tile(np.arange(next_n), B)
    bi = np.repeat(np.arange(B), next_n)
    end = np.maximum(lens[bi] - (next_n - 1 - n), 0)
    return Fp4Case(kwargs, q_codes, q_e8m0, k_codes, k_e8m0, weights.astype(np.float32), ws,
                   bi, np.zeros_like(end), end, seed)


def fp4_prefill_case(seed: int, batch: int, max_ctx: int, rows_per_batch: int, heads: int,
                     head_dim: int = HEAD_DIM, *, spread: int = 0, weight_scale: float = 1.5,
                     weight_std: float = 0.1, random_windows: bool = False) -> Fp4Case:
    """A prefill case: each batch has ``rows_per_batch`` query rows; row i of a batch with
    context n scores [0, n - rows + i + 1) (causal), or a random [start, end) window."""
    rng = rng_for(seed)
    B, H, D = batch, heads, head_dim
    lens = rng.integers(rows_per_batch, max(max_ctx, rows_per_batch) + 1, size=B)
    T = int(lens.max())
    k = spread_groups(rng, bf16_values(rng, (B, T, D)), spread)
    rows = B * rows_per_batch
    q = spread_groups(rng, bf16_values(rng, (rows, H, D)), spread)
    weights = bf16_values(rng, (rows, H), weight_std)
    q_codes, q_e8m0 = quantize_groups(q)
    k_codes, k_e8m0 = quantize_groups(k)
    table, num_blocks = block_pool(rng, B, -(-max(max_ctx, rows_per_batch) // KV_BLOCK))
    kv, ks = scatter_kv(k_codes, k_e8m0, table, lens, num_blocks)
    q_fp4, q_scale = scatter_q(q_codes, q_e8m0)
    bi = np.repeat(np.arange(B), rows_per_batch)
    i = np.tile(np.arange(rows_per_batch), B)
    if random_windows:
        a = rng.integers(0, lens[bi] + 1)
        c = rng.integers(0, lens[bi] + 1)
        start, end = np.minimum(a, c), np.maximum(a, c)
    else:
        start = np.zeros(rows, dtype=np.int64)
        end = lens[bi] - rows_per_batch + i + 1
    info = np.stack([bi, start, end, np.zeros(rows, np.int64)], axis=1).astype(np.int32)
    ws = np.float32(weight_scale)
    kwargs = dict(q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv, kv_scale=ks, block_tables=table,
                  weights=oracle.bf16_bits(weights), row_info=info, max_seq_len=max(max_ctx, rows_per_batch),
                  weight_scale=float(ws))
    return Fp4Case(kwargs, q_codes, q_e8m0, k_codes, k_e8m0, weights, ws, bi, start, end, seed)


E2M1_ONE = 0x2  # the code of 1.0
SPECIAL_BIG, SPECIAL_SMALL = 250, 0  # scale bytes of the byte-0 probe: 2^123 beside 2^-127 (or 0)


def special_scale_bytes(qc: np.ndarray, qe: np.ndarray, kc: np.ndarray, ke: np.ndarray, w: np.ndarray, rows: np.ndarray) -> None:
    """In place, on dense arrays (Q codes [R, H, D], scales [R, H, G]; batch 0's K codes [T, D],
    scales [T, G]; weights [R, H]; ``rows`` the Q rows scoring batch 0): group 0 pairs Q scale
    2^123 with token 0's K scale byte 0, group 1 a Q scale byte 0 with token 1's K scale 2^123,
    group 2 token 2's K scale byte 255; Q codes of those groups 1.0, K codes 1.0 at those
    tokens and 0 elsewhere in the groups, tokens 0..2 zero outside them; weights positive."""
    groups = ((SPECIAL_BIG, 0, SPECIAL_SMALL), (SPECIAL_SMALL, 1, SPECIAL_BIG), (None, 2, 0xFF))
    for g, (q_byte, token, k_byte) in enumerate(groups):
        cols = slice(GROUP * g, GROUP * (g + 1))
        qc[rows, :, cols] = E2M1_ONE
        if q_byte is not None:
            qe[rows, :, g] = q_byte
        kc[:, cols] = 0
        kc[token] = 0
        kc[token, cols] = E2M1_ONE
        ke[token, g] = k_byte
    w[rows] = np.abs(w[rows]) + np.float32(0.0625)


def dequant(codes: np.ndarray, e8m0: np.ndarray) -> np.ndarray:
    """Codes [..., D] and scales [..., D/32] -> float64 values (exact: dyadic, in range)."""
    vals = oracle.decode_e2m1(codes).astype(np.float64)
    scale = np.ldexp(1.0, e8m0.astype(np.int64) - 127)
    return (vals.reshape(e8m0.shape + (GROUP,)) * scale[..., None]).reshape(codes.shape)


def reference_f64(case: Fp4Case, width: int) -> np.ndarray:
    """A plain float64 scorer on the case's logical arrays (-inf outside the windows)."""
    qv = dequant(case.q_codes, case.q_e8m0)  # [rows, H, D]
    kv = dequant(case.k_codes, case.k_e8m0)  # [B, T, D]
    out = np.full((qv.shape[0], width), -np.inf)
    for r in range(qv.shape[0]):  # rows are few; tokens and heads are vectorised
        b, s, e = int(case.batch[r]), int(case.start[r]), int(case.end[r])
        if e <= s:
            continue
        qk = qv[r] @ kv[b, s:e].T  # [H, n]
        out[r, s:e] = (np.maximum(qk, 0.0) * case.weights[r][:, None].astype(np.float64)).sum(axis=0) * float(case.weight_scale)
    return out


@dataclass
class Fp8Case:
    """Arguments for ``pa_mqa_logits_fp8`` plus the dense values they came from."""

    kwargs: dict
    q_values: np.ndarray  # float64 [rows, H, D] decoded e4m3
    k_values: np.ndarray  # float64 [B, T, D] decoded e4m3
    k_scale: np.ndarray  # float32 [B, T]
    weights: np.ndarray  # float32 [rows, H]
    batch: np.ndarray
    end: np.ndarray
    seed: int | None = None


def fp8_decode_case(seed: int, batch: int, max_ctx: int, next_n: int, heads: int, head_dim: int = HEAD_DIM, *,
                    block_size: int = 64, preshuffle: bool = False, variant: str = "fn",
                    context_lens: np.ndarray | None = None) -> Fp8Case:
    """Random FP8 scorer inputs: per-row-scaled e4m3 Q, per-token-scaled e4m3 K in the block-planar
    cache (SPEC section 5), float32 weights with the Q scale folded in (as the indexer writes)."""
    rng = rng_for(seed)
    B, H, D = batch, heads, head_dim
    fmax = 448.0 if variant == "fn" else 240.0
    if context_lens is None:
        context_lens = rng.integers(0, max_ctx + 1, size=B)
    lens = np.asarray(context_lens, dtype=np.int64)
    T = max(int(lens.max()) if B else 0, 1)
    rows = B * next_n
    q = bf16_values(rng, (rows, H, D))
    qs = (np.abs(q).max(axis=2, keepdims=True).clip(1e-10) / np.float32(fmax)).astype(np.float32)
    q_codes = oracle.encode_e4m3((q / qs).astype(np.float32), variant)
    k = bf16_values(rng, (B, T, D))
    ks = (np.abs(k).max(axis=2).clip(1e-4) / np.float32(fmax)).astype(np.float32)
    k_codes = oracle.encode_e4m3((k / ks[..., None]).astype(np.float32), variant)
    w = (bf16_values(rng, (rows, H), 0.1) * qs[..., 0]).astype(np.float32)
    nblk = max(1, -(-max_ctx // block_size))
    need = B * nblk
    num_blocks = need + max(2, need // 2)
    table = rng.permutation(num_blocks)[:need].reshape(B, nblk).astype(np.int32)
    name = "aiter-fp8-kv-preshuffle" if preshuffle else "aiter-fp8-kv"
    lay = layouts.get(name)
    kv = lay.new_buffer(num_blocks=num_blocks, block_size=block_size, head_dim=D)
    for b in range(B):
        n = int(lens[b])
        t = np.arange(n)
        slots = table[b, t // block_size].astype(np.int64) * block_size + t % block_size
        lay.scatter(kv, np.ascontiguousarray(k_codes[b, :n]), np.ascontiguousarray(ks[b, :n]), slots=slots)
    kwargs = dict(q_fp8=q_codes.reshape(B, next_n, H, D), kv_cache=kv, weights=w, context_lens=lens.astype(np.int32),
                  block_tables=table, max_seq_len=max(max_ctx, 1), preshuffle=preshuffle, variant=variant)
    bi = np.repeat(np.arange(B), next_n)
    n = np.tile(np.arange(next_n), B)
    end = np.maximum(lens[bi] - (next_n - 1 - n), 0)
    return Fp8Case(kwargs, oracle.decode_e4m3(q_codes, variant).astype(np.float64),
                   oracle.decode_e4m3(k_codes, variant).astype(np.float64), ks, w, bi, end, seed)


@dataclass
class SglangCase:
    """Arguments for ``fp4_index_logits_decode`` plus the dense K it was built from."""

    kwargs: dict
    q: np.ndarray  # float32 [B, H, 128] (bf16 values)
    k_codes: np.ndarray  # uint8 [pool, 128]
    k_e8m0: np.ndarray  # uint8 [pool, 4]
    weights: np.ndarray  # float32 [B, H] (bf16 values)
    seed: int | None = None


def sglang_decode_case(seed: int, batch: int, length: int, heads: int, *, page_size: int = 64,
                       profile: str = "sglang-rne", spread: int = 0) -> SglangCase:
    """Random inputs of sglang's scorer: a page68 pool holding every K row once, per-request
    slot lists into it (random, distinct within a request), lens uniform in [0, length]."""
    rng = rng_for(seed)
    B, H, D = batch, heads, HEAD_DIM
    pool = max(length, 1) + page_size
    pages = -(-pool // page_size)
    k = spread_groups(rng, bf16_values(rng, (pages * page_size, D)), spread)
    k_codes, k_e8m0 = quantize_groups(k, profile)
    lay = layouts.get("sglang-page68")
    table = lay.new_buffer(num_pages=pages, page_size=page_size)
    lay.scatter(table, oracle.pack_nibbles(k_codes), np.ascontiguousarray(k_e8m0), page_size=page_size)
    slots = np.stack([rng.permutation(pages * page_size)[:length] for _ in range(B)]).astype(np.int64)
    lens = rng.integers(0, length + 1, size=B)
    q = spread_groups(rng, bf16_values(rng, (B, H, D)), spread)
    w = bf16_values(rng, (B, H), 0.1)
    kwargs = dict(q=oracle.bf16_bits(q), weights=oracle.bf16_bits(w), slots=slots, lens=lens, table=table,
                  page_size=page_size)
    return SglangCase(kwargs, q, k_codes, k_e8m0, w, seed)
