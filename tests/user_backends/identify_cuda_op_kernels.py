"""Kernels of the three ops whose real backends need ``--device cuda``, for
tests/test_identify_cuda_ops.py, each built from the oracle's own functions. Each ``*_ok`` is the
oracle's model (identify must name its declared profile, or say "consistent" for the layout);
each planted one breaks one rule and declares the unmodified profile:

- ``paged_scaled``: sglang's paged FP4 scorer with logits 1% too large (no field explains it);
- ``rope_pack_ties_zero``: index_k_rope_pack whose pack rounds E2M1 ties toward zero (a field);
- ``layout_scales_swapped``: kv_fp4_preshuffle_layout writing each token's scale bytes 0 and 1
  in each other's place.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mxgate import oracle
from mxgate.kernels.functions import backend_from_functions, kernel
from mxgate.op_table import OpName
from mxgate.oracle import profiles, scorers

PAGED, ROPE_PACK, KV_LAYOUT = (OpName.SGLANG_FP4_INDEX_LOGITS_PAGED, OpName.SGLANG_INDEX_K_ROPE_PACK,
                               OpName.AITER_KV_FP4_PRESHUFFLE_LAYOUT)
SGLANG_RNE = profiles.get("sglang-rne")
TIES_ZERO = dataclasses.replace(SGLANG_RNE, name="planted-rope-pack-ties-zero", tie="zero")


def _paged(factor: float):
    def fp4_index_logits_paged(q_bf16, weights_bf16, req, req_table, lens, table, max_len, ratio,
                               candidate_mask=None) -> np.ndarray:
        logits = scorers.fp4_index_logits_paged(q_bf16, weights_bf16, req, req_table, lens, table, table.shape[1] // 68,
                                                max_len, ratio, profile="threshold")
        return (logits * np.float32(factor)).astype(np.float32)

    return fp4_index_logits_paged


def _rope_pack(pack: profiles.Profile):
    def index_k_rope_pack(x_bf16, freqs, rope_dim, positions=None, cache=None, slots=None):
        """The fake FP4 quantization (gfx950's rules) dequantized, then the pack under ``pack``;
        this stand-in takes rope_dim 0 alone (no rotation) and returns (packed, e8m0)."""
        if rope_dim != 0 or cache is not None:
            raise ValueError("this stand-in takes rope_dim=0 and no cache")
        rows = oracle.bf16_to_f32(np.asarray(x_bf16, np.uint16).reshape(-1, 128))
        fake = oracle.dequantize_mx(*oracle.quantize_mx(rows, "gfx950"), "gfx950")
        return oracle.quantize_mx(fake, pack)

    return index_k_rope_pack


def _kv_layout(swap: bool):
    def kv_fp4_preshuffle_layout(kv_fp4_dense, kv_scale_dense, kv_block_size, slot_mapping, num_blocks):
        scale = np.array(kv_scale_dense, np.uint8)
        if swap:
            scale[:, [0, 1]] = scale[:, [1, 0]]
        slots = np.asarray(slot_mapping, np.int64)
        cache = oracle.layouts.get("aiter-fp4-kv").new_buffer(fill=0, num_blocks=num_blocks)
        scales = oracle.layouts.get("aiter-fp4-kv-scale").new_buffer(fill=0, num_blocks=num_blocks)
        oracle.layouts.get("aiter-fp4-kv").scatter(cache, np.asarray(kv_fp4_dense, np.uint8), slots=slots)
        oracle.layouts.get("aiter-fp4-kv-scale").scatter(scales, scale, slots=slots)
        return cache, scales

    return kv_fp4_preshuffle_layout


paged_ok = backend_from_functions("paged-ok", kernel(PAGED, _paged(1.0), profile="threshold"))
paged_scaled = backend_from_functions("paged-scaled", kernel(PAGED, _paged(1.01), profile="threshold"))
rope_pack_ok = backend_from_functions("rope-pack-ok", kernel(ROPE_PACK, _rope_pack(SGLANG_RNE), profile="sglang-rne"))
rope_pack_ties_zero = backend_from_functions("rope-pack-ties-zero",
                                             kernel(ROPE_PACK, _rope_pack(TIES_ZERO), profile="sglang-rne"))
layout_ok = backend_from_functions("layout-ok", kernel(KV_LAYOUT, _kv_layout(False), profile="gfx950"))
layout_scales_swapped = backend_from_functions("layout-scales-swapped",
                                               kernel(KV_LAYOUT, _kv_layout(True), profile="gfx950"))
