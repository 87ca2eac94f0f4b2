"""Canonical operation names a backend can implement, with the call signature each one has.

Every op takes and returns NumPy arrays. bf16 data travels as raw uint16 bit patterns.
"""

from __future__ import annotations

OPS: dict[str, str] = {
    "e2m1.encode": "(x: float32[...]) -> uint8[...] codes, one per element, no scaling",
    "mx.quantize": "(x: float32[..., N]) -> (packed uint8[..., N/2], e8m0 uint8[..., N/32]), groups of 32",
    "e4m3fn.encode": "(x: float32[...]) -> uint8[...]",
    "e4m3fnuz.encode": "(x: float32[...]) -> uint8[...]",
    "e4m3fn.decode": "(codes: uint8[...]) -> float32[...]",
    "e4m3fnuz.decode": "(codes: uint8[...]) -> float32[...]",
    "bf16.round": "(x: float32[...]) -> uint16[...] bf16 bit patterns",
    "e8m0.decode": "(codes: uint8[...]) -> float32[...]",
    "fp4_indexer.quantize": "(x_bf16: uint16[rows, 128]) -> (packed uint8[rows, 64], e8m0 uint8[rows, 4])",
    "sglang-page68.store": "(k_bf16: uint16[T, 128], slots: int64[T], cache: uint8[pages, page_size*68]) -> cache",
    "sglang-page68.gather": "(cache: uint8[pages, page_size*68], slots: int64[T]) -> (packed uint8[T, 64], e8m0 uint8[T, 4])",
    "aiter-fp4-kv.store": "(k_bf16: uint16[T, 128], slots: int64[T], kv_cache: uint8[nb,1,4,64,16], kv_scale: uint8[nb,1,4,64]) -> (kv_cache, kv_scale)",
    "indexer_qk_rope_quant_and_cache": "AITER keyword arguments, see mxgate.oracle.ops.indexer",
    "pa_mqa_logits_fp4.decode": "see mxgate.oracle.ops.logits",
    "pa_mqa_logits_fp4.prefill": "see mxgate.oracle.ops.logits",
}

# sglang's Triton FP4 indexer kernels (mxgate.kernels.sglang_triton); the last three need CUDA.
OPS.update({
    "fp4_indexer.quantize_rows": "(x_bf16: uint16[rows, 128]) -> (packed uint8[rows, 64], e8m0 uint8[rows, 4]), the multi-row (Blackwell) kernel",
    "sglang-page8.store": "(k_bf16: uint16[T, 128], slots: int64[T], kv_cache: uint8[nb,1,4,64,16], kv_scale: uint8[nb,1,4,64]) -> (kv_cache, kv_scale), eight 8-slot pages per 64-slot page over the flat buffers",
    "sglang.index_k_rope_pack": "(x_bf16: uint16[T, 128] | uint16[T, H, 128], freqs: complex64[F, rope_dim/2], rope_dim: int, positions: int64[T] | None = None, cache: uint8[pages, page_size*68] | None = None, slots: int64[T] | None = None) -> (packed uint8[T*H, 64], e8m0 uint8[T*H, 4]) | cache",
    "sglang.fp4_index_logits.decode": "(q_bf16: uint16[B, H, 128], weights_bf16: uint16[B, H], slots: int64[B, L], lens: int64[B], table: uint8[pages, page_size*68]) -> float32[B, L], -inf at positions >= lens",
    "sglang.fp4_index_logits.paged": "(q_bf16: uint16[B, H, 128], weights_bf16: uint16[B, H], req: int64[B], req_table: int32[R, W], lens: int64[B], table: uint8[pages, page_size*68], max_len: int, ratio: 1 | 2, candidate_mask: bool[B, >= max_len] | None = None) -> float32[B, max_len], defined below min(lens, max_len)",
})

# FP8 paged MQA logits over the indexer op's FP8 K cache (mxgate.oracle.ops.logits_fp8).
OPS["pa_mqa_logits_fp8.decode"] = (
    "(q_fp8: uint8[B, next_n, H, D] e4m3 codes, kv_cache: uint8[num_blocks, block_size, D+4] (aiter-fp8-kv, "
    "or -preshuffle with preshuffle=True), weights: float32[B*next_n, H], context_lens: int32[B], "
    "block_tables: int32[B, max_blocks], max_seq_len: int, preshuffle: bool = False, variant: 'fn' | 'fnuz' = 'fn', "
    "out: float32[B*next_n, max_seq_len] | None = None) -> float32[B*next_n, max_seq_len], written iff "
    "t + next_n - 1 - n < context_lens[b]; see mxgate.oracle.ops.logits_fp8"
)

# Positional inputs of each op, in call order, for checking a user's function at registration
# (mxgate.kernels.functions). Ops called with AITER-style keyword arguments are not listed:
# their functions must accept the keywords of the signature above.
POSITIONAL: dict[str, tuple[str, ...]] = {
    "e2m1.encode": ("x",), "e2m1.decode": ("codes",), "mx.quantize": ("x",),
    "e4m3fn.encode": ("x",), "e4m3fnuz.encode": ("x",), "e4m3fn.decode": ("codes",), "e4m3fnuz.decode": ("codes",),
    "bf16.round": ("x",), "e8m0.decode": ("codes",), "e8m0.scale": ("amax",), "ue8m0.round": ("scale",),
    "fp4_indexer.quantize": ("x_bf16",), "fp4_indexer.quantize_rows": ("x_bf16",),
    "sglang-page68.store": ("k_bf16", "slots", "cache"), "sglang-page68.gather": ("cache", "slots"),
    "aiter-fp4-kv.store": ("k_bf16", "slots", "kv_cache", "kv_scale"),
    "sglang-page8.store": ("k_bf16", "slots", "kv_cache", "kv_scale"),
}
OPS.setdefault("e2m1.decode", "(codes: uint8[...]) -> float32[...], the 16 E2M1 values (no scaling)")
OPS.setdefault("e8m0.scale", "(amax: float32[...]) -> uint8[...] e8m0 scale bytes under the profile's policy")
OPS.setdefault("ue8m0.round", "(scale: float32[...]) -> float32[...] the scale rounded to a power of two (ue8m0)")

# vLLM PR #42908's ROCm Triton kernels (mxgate.kernels.vllm_triton; oracle: mxgate.oracle.ops.logits_vllm
# and quant_vllm). The FP4 K cache is the vllm-fp4-indexer-k layout: uint8 [num_blocks, page_bytes].
OPS.update({
    "vllm.fp4_paged_mqa_logits": (
        "(q_fp4: uint8[B, next_n, H, 64], q_e8m0: uint8[B, next_n, H, 4], kv_cache: uint8[num_blocks, page_bytes] "
        "(vllm-fp4-indexer-k), weights: float32[B*next_n, H], context_lens: int32[B] | int32[B, next_n], "
        "block_tables: int32[B, max_blocks], max_context_len: int, *, block_size: int = 64, clean_logits: bool = True, "
        "knobs: dict[str, str] | None = None) -> float32[B*next_n, max_context_len], written for t < limit "
        "(ctx[b] - (next_n - 1 - n), or ctx[b, n]; at most max_context_len), -inf elsewhere when clean_logits"
    ),
    "vllm.fp4_mqa_logits": (
        "(q_fp4: uint8[S, H, 64], q_e8m0: uint8[S, H, 4], k_fp4: uint8[N, 64], k_e8m0: uint8[N, 4], "
        "weights: float32[S, H], cu_seqlen_ks: int32[S], cu_seqlen_ke: int32[S], *, clean_logits: bool = True, "
        "knobs: dict[str, str] | None = None) -> float32[S, N], written in [max(ks, 0), min(ke, N))"
    ),
    "vllm.fp8_paged_mqa_logits": (
        "(q_fp8: uint8[B, next_n, H, D] e4m3 codes (the platform's FP8 dtype), kv_cache: uint8[num_blocks, "
        "block_size, D+4] (aiter-fp8-kv), weights: float32[B*next_n, H], context_lens: int32[B] | int32[B, next_n], "
        "block_tables: int32[B, max_blocks], max_context_len: int, *, clean_logits: bool = True) "
        "-> float32[B*next_n, max_context_len]"
    ),
    "vllm.fp4_paged_mqa_logits_topk": (
        "(the inputs of vllm.fp4_paged_mqa_logits without clean_logits/knobs, topk: int) -> int32[B*next_n, topk] "
        "token indices (a set; rows with at most topk window cells: 0..limit-1 then -1)"
    ),
    "vllm.fp4_paged_mqa_logits_tile_topk": "(as vllm.fp4_paged_mqa_logits_topk) -> int32[B*next_n, topk]",
    "vllm.indexer_q_mxfp4": (
        "(x_bf16: uint16[T, H, 128], weights: float32[T, H], softmax_scale: float, head_scale: float) -> "
        "(packed uint8[T, H, 64], e8m0 uint8[T, H, 4], weights_out float32[T, H]) at a cos 1 / sin 0 position"
    ),
    "vllm-fp4-indexer-k.store": (
        "(k_bf16: uint16[T, 128], slots: int64[T], cache: uint8[num_blocks, page_bytes], *, block_size: int = 64) "
        "-> cache, slots < 0 skipped; k values 0 or 2^-60 <= |x| < 2^36"
    ),
})
POSITIONAL.update({
    "vllm.fp4_paged_mqa_logits": ("q_fp4", "q_e8m0", "kv_cache", "weights", "context_lens", "block_tables",
                                  "max_context_len"),
    "vllm.fp4_mqa_logits": ("q_fp4", "q_e8m0", "k_fp4", "k_e8m0", "weights", "cu_seqlen_ks", "cu_seqlen_ke"),
    "vllm.fp8_paged_mqa_logits": ("q_fp8", "kv_cache", "weights", "context_lens", "block_tables", "max_context_len"),
    "vllm.fp4_paged_mqa_logits_topk": ("q_fp4", "q_e8m0", "kv_cache", "weights", "context_lens", "block_tables",
                                       "max_context_len", "topk"),
    "vllm.fp4_paged_mqa_logits_tile_topk": ("q_fp4", "q_e8m0", "kv_cache", "weights", "context_lens",
                                            "block_tables", "max_context_len", "topk"),
    "vllm.indexer_q_mxfp4": ("x_bf16", "weights", "softmax_scale", "head_scale"),
    "vllm-fp4-indexer-k.store": ("k_bf16", "slots", "cache"),
})

# AITER's Triton kernels and Python references (mxgate.kernels.aiter_triton, aiter_reference).
_MX_LIKE = "(x: float32[..., N]) -> (packed uint8[..., N/2], e8m0 uint8[..., N/32]), groups of 32, as mx.quantize"
OPS.update({
    "aiter.fused_flatten_mxfp4_quant": _MX_LIKE + "; AITER fused_flatten_mxfp4_quant",
    "aiter.fused_rms_mxfp4_quant": _MX_LIKE + "; AITER fused_rms_mxfp4_quant with an identity RMSNorm "
                                   "(finite |x| = 0 or in [2^-76, 2^37))",
    "aiter.ref_quant_mxfp4.round_down": _MX_LIKE + "; AITER ref_quant_mxfp4(round_mode=0)",
    "aiter.ref_quant_mxfp4.even": _MX_LIKE + "; AITER ref_quant_mxfp4(round_mode=2)",
    "aiter.ref_quant_mxfp4.ceil": _MX_LIKE + "; AITER ref_quant_mxfp4(round_mode=3)",
    "aiter.fp4_quant_e2m1_with_e8m0": _MX_LIKE + "; AITER's FlyDSL scorer test generator",
    "aiter.fp4_act_quant": _MX_LIKE + "; AITER op_tests/test_dsv4_rotate_quant.py fp4_act_quant",
    "aiter.f32_to_mx_e8m0_scale.round_down": "(amax: float32[...]) -> uint8[...] e8m0, AITER mode RoundDown",
    "aiter.f32_to_mx_e8m0_scale.round_up": "(amax: float32[...]) -> uint8[...] e8m0, AITER mode RoundUp",
    "aiter.f32_to_mx_e8m0_scale.even": "(amax: float32[...]) -> uint8[...] e8m0, AITER mode Even",
    "aiter.f32_to_mx_e8m0_scale.ceil": "(amax: float32[...]) -> uint8[...] e8m0, AITER mode Ceil",
    "aiter.create_paged_preshuffle_kv_fp4": (
        "(kv_bf16: uint16[B, T, D], kv_block_size: int, num_blocks: int, block_tables: int32[B, T/kv_block_size]) "
        "-> (kv_cache uint8[nb, D/128, 4, bs, 16] (aiter-fp4-kv), kv_scale uint8[nb, D/128, 4, bs] "
        "(aiter-fp4-kv-scale), kv_fp4 uint8[B, T, D/2], kv_e8m0 uint8[B, T, D/32]); unlisted blocks zero"),
    "aiter.kv_fp4_preshuffle_layout": (
        "(kv_fp4_dense: uint8[T, D/2], kv_scale_dense: uint8[T, D/32], kv_block_size: int, slot_mapping: int64[T], "
        "num_blocks: int) -> (kv_cache uint8[nb, D/128, 4, bs, 16], kv_scale uint8[nb, D/128, 4, bs]); "
        "slots < 0 skipped, other bytes zero"),
    "aiter.dsv4_shuffle_scale": (
        "(scale: uint8[T, H, D/32]) -> uint8[T, D/128, 4, 16, round_up(H/16, 4)] (aiter-fp4-q-scale, padding 0)"),
    "aiter.ref_mqa_logits_mixed": (
        "(q_packed: uint8[B, n, H, D/2], q_scale: uint8[B, n, H, D/32], kv_fp4: uint8[B, T, D/2], "
        "kv_scale: uint8[B, T, D/32], weights: float32[B*n, H], context_lens: int32[B], next_n: int = 1, "
        "weight_scale: float = 1.0) -> float32[B*n, T], -inf outside t + n_next - 1 - n < ctx"),
    "aiter.indexer_k_quant_and_cache": (
        "(k_bf16: uint16[T, D], kv_cache: uint8[nb, B, D+4] (aiter-fp8-kv), slot_mapping: int64[T], "
        "quant_block_size: int = 128, scale_fmt: str = 'ue8m0', preshuffle: bool = False) -> kv_cache"),
    "aiter.fp8_mqa_logits": (
        "(q_fp8: uint8[S, H, D] e4m3 codes, kv_fp8: uint8[Skv, D], kv_scales: float32[Skv], weights: float32[S, H], "
        "cu_starts: int32[S], cu_ends: int32[S], clean_logits: bool = True) -> float32[S, Skv], "
        "row i defined on [cu_starts[i], cu_ends[i]), -inf elsewhere"),
})
POSITIONAL.update({name: ("x",) for name in OPS if OPS[name].startswith(_MX_LIKE)})
POSITIONAL.update({f"aiter.f32_to_mx_e8m0_scale.{m}": ("amax",) for m in ("round_down", "round_up", "even", "ceil")})
POSITIONAL.update({
    "aiter.create_paged_preshuffle_kv_fp4": ("kv_bf16", "kv_block_size", "num_blocks", "block_tables"),
    "aiter.kv_fp4_preshuffle_layout": ("kv_fp4_dense", "kv_scale_dense", "kv_block_size", "slot_mapping", "num_blocks"),
    "aiter.dsv4_shuffle_scale": ("scale",),
    "aiter.indexer_k_quant_and_cache": ("k_bf16", "kv_cache", "slot_mapping"),
    "aiter.fp8_mqa_logits": ("q_fp8", "kv_fp8", "kv_scales", "weights", "cu_starts", "cu_ends"),
    "aiter.ref_mqa_logits_mixed": ("q_packed", "q_scale", "kv_fp4", "kv_scale", "weights", "context_lens"),
})
