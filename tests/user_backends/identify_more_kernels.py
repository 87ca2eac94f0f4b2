"""Kernels of the ops identify probes beside the scorers' logits, for tests/test_identify_more.py:
vLLM's paged top-k ops, AITER's ragged FP8 scorer ``fp8_mqa_logits`` and its FP8 K cache writer
``indexer_k_quant_and_cache``. Each ``*_ok`` backend is built from the oracle (identify must name
its declared profile); each planted one breaks one rule and declares the unmodified profile:

- ``topk_byte0_zero``: both top-k ops ranked by logits with e8m0 byte 0 read as 0.0 (a field);
- ``topk_lowest``: both top-k ops give the k lowest window cells (no field explains it);
- ``fp8_ragged_fnuz``: the ragged FP8 scorer reads its codes as e4m3fnuz (a field);
- ``fp8_ragged_scaled``: the ragged FP8 scorer's logits 1% too large (no field explains it);
- ``k_cache_fnuz``: the K cache writer quantizes to e4m3fnuz (a field);
- ``k_cache_no_round``: the K cache writer keeps s = amax / 448 unrounded (no field explains it).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mxgate import oracle
from mxgate.kernels.functions import backend_from_functions, kernel
from mxgate.op_table import OpName
from mxgate.oracle import layouts, profiles
from mxgate.oracle.formats import e4m3
from mxgate.oracle.ops import indexer_k
from mxgate.oracle.scorers import aiter_fp8
from mxgate.oracle.scorers.topk import topk_indices
from mxgate.oracle.scorers import vllm as lv

GFX950 = profiles.get("gfx950")
BYTE0_ZERO = dataclasses.replace(GFX950, name="planted-byte0-zero", byte0="zero")
FNUZ = dataclasses.replace(GFX950, name="planted-fnuz", fp8_variant="fnuz")
TOPS = (OpName.VLLM_FP4_PAGED_MQA_LOGITS_TOPK, OpName.VLLM_FP4_PAGED_MQA_LOGITS_TILE_TOPK)


def _topk(profile, lowest: bool = False):
    def run(q_fp4, q_e8m0, kv_cache, weights, context_lens, block_tables, max_context_len, topk, *,
            block_size=64) -> np.ndarray:
        scored = lv.fp4_paged_logits_scored(q_fp4, q_e8m0, kv_cache, weights, context_lens, block_tables,
                                            max_context_len, block_size=block_size, profile=profile, emulate=False)
        values = np.where(scored.window, -scored.value, -np.inf) if lowest else scored.value
        return topk_indices(values, topk, scored.window).astype(np.int32)

    return run


def _fp8_ragged(variant: str, factor: float = 1.0):
    """fp8_mqa_logits as the oracle's FP8 paged scorer: one batch per row over a cache holding
    kv at slots 0..Skv-1, cells below cu_starts taken out (mxgate.inputs.aiter_fp8's mapping)."""

    def run(q_fp8, kv_fp8, kv_scales, weights, cu_starts, cu_ends, clean_logits=True) -> np.ndarray:
        rows, heads, dim = q_fp8.shape
        kv_len = kv_fp8.shape[0]
        blocks = max(1, -(-kv_len // 64))
        cache = layouts.get("aiter-fp8-kv").new_buffer(fill=0, num_blocks=blocks, block_size=64)
        layouts.get("aiter-fp8-kv").scatter(cache, kv_fp8, np.asarray(kv_scales, np.float32),
                                            slots=np.arange(kv_len, dtype=np.int64))
        table = np.tile(np.arange(blocks, dtype=np.int32), (rows, 1))
        lens = np.clip(cu_ends, 0, kv_len).astype(np.int32)
        logits = aiter_fp8.pa_mqa_logits_fp8(q_fp8.reshape(rows, 1, heads, dim), cache, weights, lens, table, kv_len,
                                             variant=variant)
        logits = np.where(np.arange(kv_len)[None, :] >= np.maximum(cu_starts, 0)[:, None], logits, -np.inf)
        return (logits * np.float32(factor)).astype(np.float32)

    return run


def _k_cache(profile):
    def run(k_bf16, kv_cache, slot_mapping, quant_block_size=128, scale_fmt="ue8m0", preshuffle=False) -> np.ndarray:
        return indexer_k.indexer_k_quant_and_cache(k_bf16, kv_cache, slot_mapping, preshuffle=preshuffle,
                                                   profile=profile)

    return run


def _k_cache_no_round(k_bf16, kv_cache, slot_mapping, quant_block_size=128, scale_fmt="ue8m0",
                      preshuffle=False) -> np.ndarray:
    """The scale fl(amax / 448) as is, not rounded up to a power of two."""
    k = oracle.bf16_to_f32(k_bf16)
    s = (np.max(np.abs(k), axis=1) / np.float32(448.0)).astype(np.float32)
    with np.errstate(all="ignore"):
        codes = e4m3.encode_e4m3((k / s[:, None]).astype(np.float32), "fn", saturate=True)
    out = np.array(kv_cache, np.uint8, copy=True)
    layouts.get("aiter-fp8-kv").scatter(out, codes, s, slots=np.asarray(slot_mapping, np.int64))
    return out


def _gfx950(op: str, function) -> object:
    return kernel(op, function, profile="gfx950")


topk_ok = backend_from_functions("topk-ok", *(_gfx950(op, _topk(GFX950)) for op in TOPS))
topk_byte0_zero = backend_from_functions("topk-byte0-zero", *(_gfx950(op, _topk(BYTE0_ZERO)) for op in TOPS))
topk_lowest = backend_from_functions("topk-lowest", *(_gfx950(op, _topk(GFX950, lowest=True)) for op in TOPS))
fp8_ragged_ok = backend_from_functions("fp8-ragged-ok", _gfx950(OpName.AITER_FP8_MQA_LOGITS, _fp8_ragged("fn")))
fp8_ragged_fnuz = backend_from_functions("fp8-ragged-fnuz", _gfx950(OpName.AITER_FP8_MQA_LOGITS, _fp8_ragged("fnuz")))
fp8_ragged_scaled = backend_from_functions("fp8-ragged-scaled",
                                           _gfx950(OpName.AITER_FP8_MQA_LOGITS, _fp8_ragged("fn", 1.01)))
k_cache_ok = backend_from_functions("k-cache-ok", _gfx950(OpName.AITER_INDEXER_K_QUANT_AND_CACHE, _k_cache(GFX950)))
k_cache_fnuz = backend_from_functions("k-cache-fnuz", _gfx950(OpName.AITER_INDEXER_K_QUANT_AND_CACHE, _k_cache(FNUZ)))
k_cache_no_round = backend_from_functions("k-cache-no-round",
                                          _gfx950(OpName.AITER_INDEXER_K_QUANT_AND_CACHE, _k_cache_no_round))
