"""vLLM's FP4 indexer K cache (PR #42908, DeepSeek-V4 sparse indexer on ROCm), head_dim 128.

One cache page per block of ``block_size`` tokens: all packed rows first (64 bytes a token),
then one 4-byte word of e8m0 scales a token (group g in byte g: the kernels read it as a
little-endian int32), then whatever padding the allocation leaves. vLLM allocates the indexer
cache [num_blocks, block_size, 132] uint8 (the FP8 width, "keep the same allocation width as
CUDA and only use the MXFP4 value/scale prefix"), aligned to 576 bytes, and hands the kernels
``torch.as_strided(cache, (num_blocks, block_size, 1, 68), (page_bytes, 68, 68, 1))``
(``kv_cache_as_quant_view``): only the page stride ``page_bytes`` reaches them, so the layout
takes it as a dim. Bytes [block_size*68, page_bytes) of a page belong to no field.

Read from: ``vllm/v1/attention/ops/rocm_fp8_fp4_paged_mqa_logits.py``
(``_fp4_paged_mqa_logits_kernel``: ``block_base + token_pos*64 + d_byte`` and
``block_base + KV_BLOCK_SIZE*64`` as int32 words) and
``vllm/v1/attention/ops/deepseek_v4_ops/fused_compress_quant_cache.py``
(``_fused_kv_compress_norm_rope_insert_indexer_mxfp4_attn``: ``val_ptr = page + pos*64``,
``scale_ptr = page + block_size*64 + pos*4``). Inside a page this is the byte order of
``sglang-page68`` with page_size = block_size.
"""

from __future__ import annotations

import numpy as np

from mxgate.oracle.geometry import TOKEN_BYTES
from mxgate.oracle.layouts._core import DATA, SCALE, Dims, Field
from mxgate.oracle.layouts._sglang import TokenPages

ALLOCATED_WIDTH = 132  # vLLM's per-token allocation (the FP8 cache width)


class VllmFp4IndexerK(TokenPages):
    name = "vllm-fp4-indexer-k"
    title = ("vLLM FP4 indexer K cache page: block_size packed rows, then block_size 4-byte e8m0 "
             "words, then unused page bytes")
    source = ("vLLM PR #42908 (EmbeddedLLM/vllm dsv4fp4indexer, fp4indexerv2): "
              "_fp4_paged_mqa_logits_kernel reads, _fused_kv_compress_norm_rope_insert_indexer_mxfp4_attn "
              "writes, kv_cache_as_quant_view makes the kernels' view")
    shape_doc = "[num_blocks, page_bytes], page_bytes >= block_size*68 (vLLM: block_size*132 or more)"
    fields = (
        Field("packed", DATA, ("slot", "dim"), "nibble", np.dtype(np.uint8),
              "packed E2M1 codes [n, 64] per token (low nibble = even dim)"),
        Field("e8m0", SCALE, ("slot", "group"), "byte", np.dtype(np.uint8),
              "e8m0 scale bytes [n, 4] per token (the int32 word's bytes, little-endian)"),
    )
    dim_defaults = {"num_blocks": None, "block_size": 64, "page_bytes": 0}
    notes = ("page_bytes=0 (the default) means block_size*68, a page with no unused bytes",
             "bytes [block_size*68, page_bytes) of every page are written by no kernel: "
             "regions() marks them unwritten and a writer must leave them alone",
             "vLLM's allocation: block_size*132 bytes a page (page_bytes = block_size*132, "
             "more when the 576-byte alignment pads the page)")

    def _derive(self, d: Dims) -> Dims:
        if d["num_blocks"] < 0:
            raise ValueError(f"num_blocks must be >= 0, got {d['num_blocks']}")
        if d["block_size"] <= 0:
            raise ValueError(f"block_size must be > 0, got {d['block_size']}")
        used = d["block_size"] * TOKEN_BYTES
        if d["page_bytes"] == 0:
            d["page_bytes"] = used
        if d["page_bytes"] < used:
            raise ValueError(f"page_bytes must be 0 or >= block_size*68 = {used}, got {d['page_bytes']}")
        return d

    def _shape(self, d: Dims) -> tuple[int, ...]:
        return (d["num_blocks"], d["page_bytes"])

    def _pages(self, d: Dims) -> tuple[int, int, int]:
        return d["num_blocks"], d["block_size"], d["page_bytes"]

    def _infer(self, shape: tuple[int, ...], arrays: tuple[np.ndarray, ...] | None) -> Dims:
        if len(shape) != 2:  # the shape check then names the expected shape
            return {"num_blocks": shape[0]} if shape else {}
        return {"num_blocks": shape[0], "page_bytes": shape[1]}

    def _formulas(self) -> dict[str, str]:
        return {"packed": "[block, pos*64 + d//2], nibble d & 1; block = slot//B, pos = slot%B",
                "e8m0": "[block, B*64 + pos*4 + g]"}
