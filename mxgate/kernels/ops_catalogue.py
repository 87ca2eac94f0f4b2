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
