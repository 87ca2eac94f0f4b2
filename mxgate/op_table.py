"""The op table: every canonical operation a backend can implement, declared once.

``OpName`` is the only place an op's name is spelled; everything else (backends, the oracle backend,
the conformance tests, the vector families, ``mxgate check``, the docs) refers to its members. A
member is a ``str``, so a user's backend may still key its ops by the plain name.

Every op takes and returns NumPy arrays. bf16 data travels as raw uint16 bit patterns.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from enum import StrEnum


class OpName(StrEnum):
    E2M1_ENCODE = "e2m1.encode"
    MX_QUANTIZE = "mx.quantize"
    E4M3FN_ENCODE = "e4m3fn.encode"
    E4M3FNUZ_ENCODE = "e4m3fnuz.encode"
    E4M3FN_DECODE = "e4m3fn.decode"
    E4M3FNUZ_DECODE = "e4m3fnuz.decode"
    BF16_ROUND = "bf16.round"
    E8M0_DECODE = "e8m0.decode"
    FP4_INDEXER_QUANTIZE = "fp4_indexer.quantize"
    SGLANG_PAGE68_STORE = "sglang-page68.store"
    SGLANG_PAGE68_GATHER = "sglang-page68.gather"
    AITER_FP4_KV_STORE = "aiter-fp4-kv.store"
    INDEXER_QK_ROPE_QUANT_AND_CACHE = "indexer_qk_rope_quant_and_cache"
    PA_MQA_LOGITS_FP4_DECODE = "pa_mqa_logits_fp4.decode"
    PA_MQA_LOGITS_FP4_PREFILL = "pa_mqa_logits_fp4.prefill"
    FP4_INDEXER_QUANTIZE_ROWS = "fp4_indexer.quantize_rows"
    SGLANG_PAGE8_STORE = "sglang-page8.store"
    SGLANG_INDEX_K_ROPE_PACK = "sglang.index_k_rope_pack"
    SGLANG_FP4_INDEX_LOGITS_DECODE = "sglang.fp4_index_logits.decode"
    SGLANG_FP4_INDEX_LOGITS_PAGED = "sglang.fp4_index_logits.paged"
    PA_MQA_LOGITS_FP8_DECODE = "pa_mqa_logits_fp8.decode"
    E2M1_DECODE = "e2m1.decode"
    E8M0_SCALE = "e8m0.scale"
    UE8M0_ROUND = "ue8m0.round"
    VLLM_FP4_PAGED_MQA_LOGITS = "vllm.fp4_paged_mqa_logits"
    VLLM_FP4_MQA_LOGITS = "vllm.fp4_mqa_logits"
    VLLM_FP8_PAGED_MQA_LOGITS = "vllm.fp8_paged_mqa_logits"
    VLLM_FP4_PAGED_MQA_LOGITS_TOPK = "vllm.fp4_paged_mqa_logits_topk"
    VLLM_FP4_PAGED_MQA_LOGITS_TILE_TOPK = "vllm.fp4_paged_mqa_logits_tile_topk"
    VLLM_INDEXER_Q_MXFP4 = "vllm.indexer_q_mxfp4"
    VLLM_FP4_INDEXER_K_STORE = "vllm-fp4-indexer-k.store"
    AITER_FUSED_FLATTEN_MXFP4_QUANT = "aiter.fused_flatten_mxfp4_quant"
    AITER_FUSED_RMS_MXFP4_QUANT = "aiter.fused_rms_mxfp4_quant"
    AITER_REF_QUANT_MXFP4_ROUND_DOWN = "aiter.ref_quant_mxfp4.round_down"
    AITER_REF_QUANT_MXFP4_EVEN = "aiter.ref_quant_mxfp4.even"
    AITER_REF_QUANT_MXFP4_CEIL = "aiter.ref_quant_mxfp4.ceil"
    AITER_FP4_QUANT_E2M1_WITH_E8M0 = "aiter.fp4_quant_e2m1_with_e8m0"
    AITER_FP4_ACT_QUANT = "aiter.fp4_act_quant"
    AITER_F32_TO_MX_E8M0_SCALE_ROUND_DOWN = "aiter.f32_to_mx_e8m0_scale.round_down"
    AITER_F32_TO_MX_E8M0_SCALE_ROUND_UP = "aiter.f32_to_mx_e8m0_scale.round_up"
    AITER_F32_TO_MX_E8M0_SCALE_EVEN = "aiter.f32_to_mx_e8m0_scale.even"
    AITER_F32_TO_MX_E8M0_SCALE_CEIL = "aiter.f32_to_mx_e8m0_scale.ceil"
    AITER_CREATE_PAGED_PRESHUFFLE_KV_FP4 = "aiter.create_paged_preshuffle_kv_fp4"
    AITER_KV_FP4_PRESHUFFLE_LAYOUT = "aiter.kv_fp4_preshuffle_layout"
    AITER_DSV4_SHUFFLE_SCALE = "aiter.dsv4_shuffle_scale"
    AITER_REF_MQA_LOGITS_MIXED = "aiter.ref_mqa_logits_mixed"
    AITER_INDEXER_K_QUANT_AND_CACHE = "aiter.indexer_k_quant_and_cache"
    AITER_FP8_MQA_LOGITS = "aiter.fp8_mqa_logits"


OPS: dict[str, str] = {
    OpName.E2M1_ENCODE: "(x: float32[...]) -> uint8[...] codes, one per element, no scaling",
    OpName.MX_QUANTIZE: "(x: float32[..., N]) -> (packed uint8[..., N/2], e8m0 uint8[..., N/32]), groups of 32",
    OpName.E4M3FN_ENCODE: "(x: float32[...]) -> uint8[...]",
    OpName.E4M3FNUZ_ENCODE: "(x: float32[...]) -> uint8[...]",
    OpName.E4M3FN_DECODE: "(codes: uint8[...]) -> float32[...]",
    OpName.E4M3FNUZ_DECODE: "(codes: uint8[...]) -> float32[...]",
    OpName.BF16_ROUND: "(x: float32[...]) -> uint16[...] bf16 bit patterns",
    OpName.E8M0_DECODE: "(codes: uint8[...]) -> float32[...]",
    OpName.FP4_INDEXER_QUANTIZE: "(x_bf16: uint16[rows, 128]) -> (packed uint8[rows, 64], e8m0 uint8[rows, 4])",
    OpName.SGLANG_PAGE68_STORE: "(k_bf16: uint16[T, 128], slots: int64[T], cache: uint8[pages, page_size*68]) -> cache",
    OpName.SGLANG_PAGE68_GATHER: "(cache: uint8[pages, page_size*68], slots: int64[T]) -> (packed uint8[T, 64], e8m0 uint8[T, 4])",
    OpName.AITER_FP4_KV_STORE: "(k_bf16: uint16[T, 128], slots: int64[T], kv_cache: uint8[nb,1,4,64,16], kv_scale: uint8[nb,1,4,64]) -> (kv_cache, kv_scale)",
    OpName.INDEXER_QK_ROPE_QUANT_AND_CACHE: (
        "(q: uint16[T, H, 128] bf16, q_out: uint8[T, H, 64 | 128] | None, weights: uint16[T, H] bf16, "
        "weights_out: float32[T, H] | None, k: uint16[T, 128] bf16, kv_cache: uint8[...] | None, "
        "slot_mapping: int64[T], norm_weight: float32[128], norm_bias: float32[128], positions: int64[T], "
        "cos_cache: uint16[max_pos, 32] bf16, sin_cache: uint16[max_pos, 32] bf16, epsilon: float, "
        "quant_block_size: int, scale_fmt: str, weights_scale: float, mode: 'fp4' | 'fp8', AITER keyword "
        "names) -> (q_out, q_scale, weights_out, kv_cache, kv_scale) in the mode's layouts; "
        "see mxgate.oracle.ops.indexer"
    ),
    OpName.PA_MQA_LOGITS_FP4_DECODE: (
        "(q_fp4: uint8[B, next_n, H, D/2] (aiter-fp4-q), q_scale: uint8[B, next_n, k_tiles, 4, 16, QS_PAD] "
        "(aiter-fp4-q-scale), kv_cache: uint8[num_blocks, k_tiles, 4, 64, 16] (aiter-fp4-kv), kv_scale: "
        "uint8[num_blocks, k_tiles, 4, 64] (aiter-fp4-kv-scale), block_tables: int32[B, max_blocks], "
        "weights: uint16[B*next_n, H] bf16, context_lens: int32[B], max_seq_len: int, AITER keyword names) "
        "-> float32[B*next_n, max_seq_len], written for t < ctx[b] - (next_n - 1 - n); "
        "see mxgate.oracle.scorers.aiter_fp4"
    ),
    OpName.PA_MQA_LOGITS_FP4_PREFILL: (
        "(q_fp4: uint8[rows, H, D/2], q_scale: uint8[rows, k_tiles, 4, 16, QS_PAD], kv_cache: "
        "uint8[num_blocks, k_tiles, 4, 64, 16], kv_scale: uint8[num_blocks, k_tiles, 4, 64], block_tables: "
        "int32[B, max_blocks], weights: uint16[rows, H] bf16, row_info: int32[rows, 4], max_seq_len: int, "
        "AITER keyword names) -> float32[rows, max_seq_len], written in [local_start, local_end); "
        "see mxgate.oracle.scorers.aiter_fp4"
    ),
}

# sglang's Triton FP4 indexer kernels (mxgate.kernels.sglang_triton); the last three need CUDA.
OPS.update({
    OpName.FP4_INDEXER_QUANTIZE_ROWS: "(x_bf16: uint16[rows, 128]) -> (packed uint8[rows, 64], e8m0 uint8[rows, 4]), the multi-row (Blackwell) kernel",
    OpName.SGLANG_PAGE8_STORE: "(k_bf16: uint16[T, 128], slots: int64[T], kv_cache: uint8[nb,1,4,64,16], kv_scale: uint8[nb,1,4,64]) -> (kv_cache, kv_scale), eight 8-slot pages per 64-slot page over the flat buffers",
    OpName.SGLANG_INDEX_K_ROPE_PACK: "(x_bf16: uint16[T, 128] | uint16[T, H, 128], freqs: complex64[F, rope_dim/2], rope_dim: int, positions: int64[T] | None = None, cache: uint8[pages, page_size*68] | None = None, slots: int64[T] | None = None) -> (packed uint8[T*H, 64], e8m0 uint8[T*H, 4]) | cache",
    OpName.SGLANG_FP4_INDEX_LOGITS_DECODE: "(q_bf16: uint16[B, H, 128], weights_bf16: uint16[B, H], slots: int64[B, L], lens: int64[B], table: uint8[pages, page_size*68]) -> float32[B, L], -inf at positions >= lens",
    OpName.SGLANG_FP4_INDEX_LOGITS_PAGED: "(q_bf16: uint16[B, H, 128], weights_bf16: uint16[B, H], req: int64[B], req_table: int32[R, W], lens: int64[B], table: uint8[pages, page_size*68], max_len: int, ratio: 1 | 2, candidate_mask: bool[B, >= max_len] | None = None) -> float32[B, max_len], defined below min(lens, max_len)",
})

# FP8 paged MQA logits over the indexer op's FP8 K cache (mxgate.oracle.scorers.aiter_fp8).
OPS[OpName.PA_MQA_LOGITS_FP8_DECODE] = (
    "(q_fp8: uint8[B, next_n, H, D] e4m3 codes, kv_cache: uint8[num_blocks, block_size, D+4] (aiter-fp8-kv, "
    "or -preshuffle with preshuffle=True), weights: float32[B*next_n, H], context_lens: int32[B], "
    "block_tables: int32[B, max_blocks], max_seq_len: int, preshuffle: bool = False, variant: 'fn' | 'fnuz' = 'fn', "
    "out: float32[B*next_n, max_seq_len] | None = None) -> float32[B*next_n, max_seq_len], written iff "
    "t + next_n - 1 - n < context_lens[b]; see mxgate.oracle.scorers.aiter_fp8"
)

# Positional inputs of each op, in call order, for checking a user's function at registration
# (mxgate.kernels.functions). Ops called with AITER-style keyword arguments are not listed:
# their functions must accept the keywords of the signature above.
POSITIONAL: dict[str, tuple[str, ...]] = {
    OpName.E2M1_ENCODE: ("x",), OpName.E2M1_DECODE: ("codes",), OpName.MX_QUANTIZE: ("x",),
    OpName.E4M3FN_ENCODE: ("x",), OpName.E4M3FNUZ_ENCODE: ("x",), OpName.E4M3FN_DECODE: ("codes",), OpName.E4M3FNUZ_DECODE: ("codes",),
    OpName.BF16_ROUND: ("x",), OpName.E8M0_DECODE: ("codes",), OpName.E8M0_SCALE: ("amax",), OpName.UE8M0_ROUND: ("scale",),
    OpName.FP4_INDEXER_QUANTIZE: ("x_bf16",), OpName.FP4_INDEXER_QUANTIZE_ROWS: ("x_bf16",),
    OpName.SGLANG_PAGE68_STORE: ("k_bf16", "slots", "cache"), OpName.SGLANG_PAGE68_GATHER: ("cache", "slots"),
    OpName.AITER_FP4_KV_STORE: ("k_bf16", "slots", "kv_cache", "kv_scale"),
    OpName.SGLANG_PAGE8_STORE: ("k_bf16", "slots", "kv_cache", "kv_scale"),
}
OPS.setdefault(OpName.E2M1_DECODE, "(codes: uint8[...]) -> float32[...], the 16 E2M1 values (no scaling)")
OPS.setdefault(OpName.E8M0_SCALE, "(amax: float32[...]) -> uint8[...] e8m0 scale bytes under the profile's policy")
OPS.setdefault(OpName.UE8M0_ROUND, "(scale: float32[...]) -> float32[...] the scale rounded to a power of two (ue8m0)")

# vLLM PR #42908's ROCm Triton kernels (mxgate.kernels.vllm_triton; oracle: mxgate.oracle.scorers.vllm
# and quant_vllm). The FP4 K cache is the vllm-fp4-indexer-k layout: uint8 [num_blocks, page_bytes].
OPS.update({
    OpName.VLLM_FP4_PAGED_MQA_LOGITS: (
        "(q_fp4: uint8[B, next_n, H, 64], q_e8m0: uint8[B, next_n, H, 4], kv_cache: uint8[num_blocks, page_bytes] "
        "(vllm-fp4-indexer-k), weights: float32[B*next_n, H], context_lens: int32[B] | int32[B, next_n], "
        "block_tables: int32[B, max_blocks], max_context_len: int, *, block_size: int = 64, clean_logits: bool = True, "
        "knobs: dict[str, str] | None = None) -> float32[B*next_n, max_context_len], written for t < limit "
        "(ctx[b] - (next_n - 1 - n), or ctx[b, n]; at most max_context_len), -inf elsewhere when clean_logits"
    ),
    OpName.VLLM_FP4_MQA_LOGITS: (
        "(q_fp4: uint8[S, H, 64], q_e8m0: uint8[S, H, 4], k_fp4: uint8[N, 64], k_e8m0: uint8[N, 4], "
        "weights: float32[S, H], cu_seqlen_ks: int32[S], cu_seqlen_ke: int32[S], *, clean_logits: bool = True, "
        "knobs: dict[str, str] | None = None) -> float32[S, N], written in [max(ks, 0), min(ke, N))"
    ),
    OpName.VLLM_FP8_PAGED_MQA_LOGITS: (
        "(q_fp8: uint8[B, next_n, H, D] e4m3 codes (the platform's FP8 dtype), kv_cache: uint8[num_blocks, "
        "block_size, D+4] (aiter-fp8-kv), weights: float32[B*next_n, H], context_lens: int32[B] | int32[B, next_n], "
        "block_tables: int32[B, max_blocks], max_context_len: int, *, clean_logits: bool = True) "
        "-> float32[B*next_n, max_context_len]"
    ),
    OpName.VLLM_FP4_PAGED_MQA_LOGITS_TOPK: (
        "(q_fp4: uint8[B, next_n, H, 64], q_e8m0: uint8[B, next_n, H, 4], kv_cache: uint8[num_blocks, page_bytes] "
        "(vllm-fp4-indexer-k), weights: float32[B*next_n, H], context_lens: int32[B] | int32[B, next_n], "
        "block_tables: int32[B, max_blocks], max_context_len: int, topk: int, *, block_size: int = 64) "
        "-> int32[B*next_n, topk] token indices (a set; rows with at most topk window cells: 0..limit-1 then -1)"
    ),
    OpName.VLLM_FP4_PAGED_MQA_LOGITS_TILE_TOPK: (
        "(q_fp4: uint8[B, next_n, H, 64], q_e8m0: uint8[B, next_n, H, 4], kv_cache: uint8[num_blocks, page_bytes] "
        "(vllm-fp4-indexer-k), weights: float32[B*next_n, H], context_lens: int32[B] | int32[B, next_n], "
        "block_tables: int32[B, max_blocks], max_context_len: int, topk: int, *, block_size: int = 64) "
        "-> int32[B*next_n, topk], as vllm.fp4_paged_mqa_logits_topk by the tiled kernel"
    ),
    OpName.VLLM_INDEXER_Q_MXFP4: (
        "(x_bf16: uint16[T, H, 128], weights: float32[T, H], softmax_scale: float, head_scale: float) -> "
        "(packed uint8[T, H, 64], e8m0 uint8[T, H, 4], weights_out float32[T, H]) at a cos 1 / sin 0 position"
    ),
    OpName.VLLM_FP4_INDEXER_K_STORE: (
        "(k_bf16: uint16[T, 128], slots: int64[T], cache: uint8[num_blocks, page_bytes], *, block_size: int = 64) "
        "-> cache, slots < 0 skipped; k values 0 or 2^-60 <= |x| < 2^36"
    ),
})
POSITIONAL.update({
    OpName.VLLM_FP4_PAGED_MQA_LOGITS: ("q_fp4", "q_e8m0", "kv_cache", "weights", "context_lens", "block_tables",
                                  "max_context_len"),
    OpName.VLLM_FP4_MQA_LOGITS: ("q_fp4", "q_e8m0", "k_fp4", "k_e8m0", "weights", "cu_seqlen_ks", "cu_seqlen_ke"),
    OpName.VLLM_FP8_PAGED_MQA_LOGITS: ("q_fp8", "kv_cache", "weights", "context_lens", "block_tables", "max_context_len"),
    OpName.VLLM_FP4_PAGED_MQA_LOGITS_TOPK: ("q_fp4", "q_e8m0", "kv_cache", "weights", "context_lens", "block_tables",
                                       "max_context_len", "topk"),
    OpName.VLLM_FP4_PAGED_MQA_LOGITS_TILE_TOPK: ("q_fp4", "q_e8m0", "kv_cache", "weights", "context_lens",
                                            "block_tables", "max_context_len", "topk"),
    OpName.VLLM_INDEXER_Q_MXFP4: ("x_bf16", "weights", "softmax_scale", "head_scale"),
    OpName.VLLM_FP4_INDEXER_K_STORE: ("k_bf16", "slots", "cache"),
})

# AITER's Triton kernels and Python references (mxgate.kernels.aiter_triton, aiter_reference).
_MX_LIKE = "(x: float32[..., N]) -> (packed uint8[..., N/2], e8m0 uint8[..., N/32]), groups of 32, as mx.quantize"
OPS.update({
    OpName.AITER_FUSED_FLATTEN_MXFP4_QUANT: _MX_LIKE + "; AITER fused_flatten_mxfp4_quant",
    OpName.AITER_FUSED_RMS_MXFP4_QUANT: _MX_LIKE + "; AITER fused_rms_mxfp4_quant with an identity RMSNorm "
                                   "(finite |x| = 0 or in [2^-76, 2^37))",
    OpName.AITER_REF_QUANT_MXFP4_ROUND_DOWN: _MX_LIKE + "; AITER ref_quant_mxfp4(round_mode=0)",
    OpName.AITER_REF_QUANT_MXFP4_EVEN: _MX_LIKE + "; AITER ref_quant_mxfp4(round_mode=2)",
    OpName.AITER_REF_QUANT_MXFP4_CEIL: _MX_LIKE + "; AITER ref_quant_mxfp4(round_mode=3)",
    OpName.AITER_FP4_QUANT_E2M1_WITH_E8M0: _MX_LIKE + "; AITER's FlyDSL scorer test generator",
    OpName.AITER_FP4_ACT_QUANT: _MX_LIKE + "; AITER op_tests/test_dsv4_rotate_quant.py fp4_act_quant",
    OpName.AITER_F32_TO_MX_E8M0_SCALE_ROUND_DOWN: "(amax: float32[...]) -> uint8[...] e8m0, AITER mode RoundDown",
    OpName.AITER_F32_TO_MX_E8M0_SCALE_ROUND_UP: "(amax: float32[...]) -> uint8[...] e8m0, AITER mode RoundUp",
    OpName.AITER_F32_TO_MX_E8M0_SCALE_EVEN: "(amax: float32[...]) -> uint8[...] e8m0, AITER mode Even",
    OpName.AITER_F32_TO_MX_E8M0_SCALE_CEIL: "(amax: float32[...]) -> uint8[...] e8m0, AITER mode Ceil",
    OpName.AITER_CREATE_PAGED_PRESHUFFLE_KV_FP4: (
        "(kv_bf16: uint16[B, T, D], kv_block_size: int, num_blocks: int, block_tables: int32[B, T/kv_block_size]) "
        "-> (kv_cache uint8[nb, D/128, 4, bs, 16] (aiter-fp4-kv), kv_scale uint8[nb, D/128, 4, bs] "
        "(aiter-fp4-kv-scale), kv_fp4 uint8[B, T, D/2], kv_e8m0 uint8[B, T, D/32]); unlisted blocks zero"),
    OpName.AITER_KV_FP4_PRESHUFFLE_LAYOUT: (
        "(kv_fp4_dense: uint8[T, D/2], kv_scale_dense: uint8[T, D/32], kv_block_size: int, slot_mapping: int64[T], "
        "num_blocks: int) -> (kv_cache uint8[nb, D/128, 4, bs, 16], kv_scale uint8[nb, D/128, 4, bs]); "
        "slots < 0 skipped, other bytes zero"),
    OpName.AITER_DSV4_SHUFFLE_SCALE: (
        "(scale: uint8[T, H, D/32]) -> uint8[T, D/128, 4, 16, round_up(H/16, 4)] (aiter-fp4-q-scale, padding 0)"),
    OpName.AITER_REF_MQA_LOGITS_MIXED: (
        "(q_packed: uint8[B, n, H, D/2], q_scale: uint8[B, n, H, D/32], kv_fp4: uint8[B, T, D/2], "
        "kv_scale: uint8[B, T, D/32], weights: float32[B*n, H], context_lens: int32[B], next_n: int = 1, "
        "weight_scale: float = 1.0) -> float32[B*n, T], -inf outside t + n_next - 1 - n < ctx"),
    OpName.AITER_INDEXER_K_QUANT_AND_CACHE: (
        "(k_bf16: uint16[T, D], kv_cache: uint8[nb, B, D+4] (aiter-fp8-kv), slot_mapping: int64[T], "
        "quant_block_size: int = 128, scale_fmt: str = 'ue8m0', preshuffle: bool = False) -> kv_cache"),
    OpName.AITER_FP8_MQA_LOGITS: (
        "(q_fp8: uint8[S, H, D] e4m3 codes, kv_fp8: uint8[Skv, D], kv_scales: float32[Skv], weights: float32[S, H], "
        "cu_starts: int32[S], cu_ends: int32[S], clean_logits: bool = True) -> float32[S, Skv], "
        "row i defined on [cu_starts[i], cu_ends[i]), -inf elsewhere"),
})
POSITIONAL.update({name: ("x",) for name in OPS if OPS[name].startswith(_MX_LIKE)})
POSITIONAL.update({f"aiter.f32_to_mx_e8m0_scale.{m}": ("amax",) for m in ("round_down", "round_up", "even", "ceil")})
POSITIONAL.update({
    OpName.AITER_CREATE_PAGED_PRESHUFFLE_KV_FP4: ("kv_bf16", "kv_block_size", "num_blocks", "block_tables"),
    OpName.AITER_KV_FP4_PRESHUFFLE_LAYOUT: ("kv_fp4_dense", "kv_scale_dense", "kv_block_size", "slot_mapping", "num_blocks"),
    OpName.AITER_DSV4_SHUFFLE_SCALE: ("scale",),
    OpName.AITER_INDEXER_K_QUANT_AND_CACHE: ("k_bf16", "kv_cache", "slot_mapping"),
    OpName.AITER_FP8_MQA_LOGITS: ("q_fp8", "kv_fp8", "kv_scales", "weights", "cu_starts", "cu_ends"),
    OpName.AITER_REF_MQA_LOGITS_MIXED: ("q_packed", "q_scale", "kv_fp4", "kv_scale", "weights", "context_lens"),
})


# ---- the typed declaration of each op ---------------------------------------------------------


class Compare(StrEnum):
    """How the gate compares a backend's result with the oracle's (mxgate.conformance.judge)."""

    BITS = "bits"  # every byte or code equal; byte layouts also get explain's class counts
    NAN_EQUAL = "nan-equal"  # float results equal bit for bit, any NaN equal to any NaN
    WITHIN_BOUND = "within-bound"  # a float score within the oracle's rigorous error bound
    ENVELOPE = "envelope-member"  # equal to one member of the oracle's set of admissible results
    TOPK_SET = "top-k-set"  # the same index set, ties within the bound either way


@dataclass(frozen=True)
class Arg:
    """One input or output: its name (or role), element type and shape rule, as declared."""

    name: str
    dtype: str
    shape: str


@dataclass(frozen=True)
class OpSpec:
    name: OpName
    signature: str  # the declaration, in words: inputs -> outputs, with what is defined where
    positional: tuple[str, ...]  # call order of the inputs (empty: called with keywords)
    compare: Compare
    reference: str | None  # "module:function" of the oracle's reference, None: a backend-specific model
    profile_fields: tuple[str, ...]  # the Profile fields the reference reads
    inplace: tuple[str, ...] = ()  # inputs that are output buffers (caches, out=): the op may write them

    def input_name(self, key: int | str) -> str:
        """The declared name of positional input ``key`` (an index) or keyword ``key``."""
        if isinstance(key, int):
            return self.positional[key] if key < len(self.positional) else f"argument {key}"
        return key

    @property
    def inputs(self) -> tuple[Arg, ...]:
        return _args(self.signature.split("->", 1)[0])

    @property
    def outputs(self) -> tuple[Arg, ...]:
        if "->" not in self.signature:
            return ()
        text = self.signature.split("->", 1)[1]
        typed = _args(text)
        if typed:
            return typed
        # an in-place op returns its buffers: "-> cache", "-> (kv_cache, kv_scale)"
        by_name = {a.name: a for a in self.inputs}
        return tuple(by_name[w] for w in re.findall(r"\w+", text.split(",  ")[0].split(";")[0]) if w in by_name)


_ARG = re.compile(r"(?:(\w+):\s*)?\b(u?int\d+|float\d+|bool|complex\d+)\[([^\]]*)\]|(\w+):\s*(int|float|bool|str)\b(?!\[)")


def _args(text: str) -> tuple[Arg, ...]:
    """The typed arguments of a signature's text: ``name: dtype[shape]`` or ``name: int|float|bool|str``."""
    return tuple(Arg(m.group(1) or "", m.group(2), f"[{m.group(3)}]") if m.group(2) else Arg(m.group(4), m.group(5), "scalar")
                 for m in _ARG.finditer(text))


E2M1_FIELDS = ("tie", "zero_sign", "nan", "inf")
SCALE_FIELDS = ("scale_policy", "scale_arithmetic", "amax_floor", "floor_where", "exp_clamp", "byte0", "byte255",
                "amax_nan", "special_scale")
MX_FIELDS = E2M1_FIELDS + SCALE_FIELDS + ("nan_scale",)
FP8_FIELDS = ("fp8_variant", "fp8_overflow")
SCORER_FIELDS = MX_FIELDS + ("fma_contraction",)

_ORACLE = "mxgate.oracle"
_OPS = "mxgate.oracle.ops"
# op -> (compare, reference, profile fields); every op not listed is compared bit for bit against a
# backend-specific model and reads the whole MX rule set
_DECLARED: dict[OpName, tuple[Compare, str | None, tuple[str, ...]]] = {
    OpName.E2M1_ENCODE: (Compare.BITS, f"{_ORACLE}:encode_e2m1", E2M1_FIELDS),
    OpName.E2M1_DECODE: (Compare.NAN_EQUAL, f"{_ORACLE}:decode_e2m1", ()),
    OpName.MX_QUANTIZE: (Compare.BITS, f"{_ORACLE}:quantize_mx", MX_FIELDS),
    OpName.E4M3FN_ENCODE: (Compare.BITS, f"{_ORACLE}:encode_e4m3", ("fp8_overflow",)),
    OpName.E4M3FNUZ_ENCODE: (Compare.BITS, f"{_ORACLE}:encode_e4m3", ("fp8_overflow",)),
    OpName.E4M3FN_DECODE: (Compare.NAN_EQUAL, f"{_ORACLE}:decode_e4m3", ()),
    OpName.E4M3FNUZ_DECODE: (Compare.NAN_EQUAL, f"{_ORACLE}:decode_e4m3", ()),
    OpName.BF16_ROUND: (Compare.BITS, f"{_ORACLE}:bf16_bits", ("bf16_nan",)),
    OpName.E8M0_DECODE: (Compare.NAN_EQUAL, f"{_ORACLE}:decode_e8m0", ("nan_scale",)),
    OpName.E8M0_SCALE: (Compare.BITS, f"{_ORACLE}:e8m0_scale", SCALE_FIELDS),
    OpName.UE8M0_ROUND: (Compare.NAN_EQUAL, "mxgate.oracle.scales:ue8m0_round", ("ue8m0_rounding",)),
    OpName.FP4_INDEXER_QUANTIZE: (Compare.BITS, f"{_ORACLE}:quantize_mx", MX_FIELDS),
    OpName.FP4_INDEXER_QUANTIZE_ROWS: (Compare.BITS, f"{_ORACLE}:quantize_mx", MX_FIELDS),
    OpName.SGLANG_PAGE68_STORE: (Compare.BITS, f"{_ORACLE}:quantize_mx", MX_FIELDS),
    OpName.SGLANG_PAGE68_GATHER: (Compare.BITS, None, ()),
    OpName.AITER_FP4_KV_STORE: (Compare.BITS, f"{_ORACLE}:quantize_mx", MX_FIELDS),
    OpName.SGLANG_PAGE8_STORE: (Compare.BITS, f"{_ORACLE}:quantize_mx", MX_FIELDS),
    OpName.INDEXER_QK_ROPE_QUANT_AND_CACHE: (Compare.ENVELOPE, f"{_OPS}:indexer_qk_rope_quant_and_cache",
                                             MX_FIELDS + FP8_FIELDS + ("fma_contraction", "ue8m0_rounding")),
    OpName.PA_MQA_LOGITS_FP4_DECODE: (Compare.WITHIN_BOUND, f"{_OPS}:pa_mqa_logits_fp4", SCORER_FIELDS),
    OpName.PA_MQA_LOGITS_FP4_PREFILL: (Compare.WITHIN_BOUND, f"{_OPS}:pa_mqa_logits_fp4_prefill", SCORER_FIELDS),
    OpName.PA_MQA_LOGITS_FP8_DECODE: (Compare.WITHIN_BOUND, f"{_OPS}:pa_mqa_logits_fp8", FP8_FIELDS),
    OpName.SGLANG_FP4_INDEX_LOGITS_DECODE: (Compare.WITHIN_BOUND, None, SCORER_FIELDS),
    OpName.SGLANG_FP4_INDEX_LOGITS_PAGED: (Compare.WITHIN_BOUND, None, SCORER_FIELDS),
    OpName.VLLM_FP4_PAGED_MQA_LOGITS: (Compare.WITHIN_BOUND, None, SCORER_FIELDS),
    OpName.VLLM_FP4_MQA_LOGITS: (Compare.WITHIN_BOUND, None, SCORER_FIELDS),
    OpName.VLLM_FP8_PAGED_MQA_LOGITS: (Compare.WITHIN_BOUND, None, FP8_FIELDS),
    OpName.VLLM_FP4_PAGED_MQA_LOGITS_TOPK: (Compare.TOPK_SET, None, SCORER_FIELDS),
    OpName.VLLM_FP4_PAGED_MQA_LOGITS_TILE_TOPK: (Compare.TOPK_SET, None, SCORER_FIELDS),
    OpName.AITER_REF_MQA_LOGITS_MIXED: (Compare.WITHIN_BOUND, None, SCORER_FIELDS),
    OpName.AITER_FP8_MQA_LOGITS: (Compare.WITHIN_BOUND, None, FP8_FIELDS),
    OpName.AITER_INDEXER_K_QUANT_AND_CACHE: (Compare.BITS, None, FP8_FIELDS + ("ue8m0_rounding",)),
}
for _mode in ("ROUND_DOWN", "ROUND_UP", "EVEN", "CEIL"):
    _DECLARED[OpName[f"AITER_F32_TO_MX_E8M0_SCALE_{_mode}"]] = (Compare.BITS, f"{_ORACLE}:e8m0_scale", SCALE_FIELDS)

# Inputs an op owns as outputs: the gate writes only these back from a backend's worker; any other
# input a backend writes into is a fail ("wrote into its input x").
_INPLACE: dict[OpName, tuple[str, ...]] = {
    OpName.SGLANG_PAGE68_STORE: ("cache",),
    OpName.AITER_FP4_KV_STORE: ("kv_cache", "kv_scale"),
    OpName.SGLANG_PAGE8_STORE: ("kv_cache", "kv_scale"),
    OpName.INDEXER_QK_ROPE_QUANT_AND_CACHE: ("q_out", "weights_out", "kv_cache", "q_scale_out", "kv_cache_scale"),
    OpName.PA_MQA_LOGITS_FP4_DECODE: ("out",),
    OpName.PA_MQA_LOGITS_FP4_PREFILL: ("out",),
    OpName.PA_MQA_LOGITS_FP8_DECODE: ("out",),
    OpName.SGLANG_INDEX_K_ROPE_PACK: ("cache",),
    OpName.VLLM_FP4_INDEXER_K_STORE: ("cache",),
    OpName.AITER_INDEXER_K_QUANT_AND_CACHE: ("kv_cache",),
}

TABLE: dict[OpName, OpSpec] = {
    op: OpSpec(op, OPS[op], POSITIONAL.get(op, ()), *_DECLARED.get(op, (Compare.BITS, None, MX_FIELDS)),
               inplace=_INPLACE.get(op, ()))
    for op in OpName
}


def spec(op: str) -> OpSpec:
    """The declaration of ``op`` (a member or its plain name); a one-line error for an unknown name."""
    try:
        return TABLE[OpName(op)]
    except ValueError:
        raise ValueError(f"unknown op {op!r}; the ops are: {', '.join(OpName)}") from None


def reference(op: str):
    """The oracle's reference function of ``op``, NumPy in and out (None where a backend-specific
    model judges it). The gate's device dispatch (the twin on ``cuda``) is
    ``mxgate.conformance.reference``'s."""
    path = spec(op).reference
    if path is None:
        return None
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def markdown() -> str:
    """The op table as Markdown (docs/ops/table.md is this text; a test keeps it current)."""
    lines = ["# The op table", "",
             "Generated from `mxgate/op_table.py` by `mxgate backends --ops`; do not edit by hand.", "",
             "| op | inputs | outputs | compared | oracle reference | profile fields |", "|---|---|---|---|---|---|"]
    for s in TABLE.values():
        ins = ", ".join(f"`{a.name}: {a.dtype}{a.shape}`" for a in s.inputs) or "keywords, see the signature"
        outs = ", ".join(f"`{a.dtype}{a.shape}`" for a in s.outputs)
        lines.append(f"| `{s.name}` | {ins} | {outs} | {s.compare} | {f'`{s.reference}`' if s.reference else 'backend model'} "
                     f"| {', '.join(s.profile_fields) or '-'} |")
    lines += ["", "Signatures in full:", ""]
    lines += [f"- `{s.name}`: {s.signature.replace('|', '&#124;')}" for s in TABLE.values()]
    return "\n".join(lines) + "\n"
