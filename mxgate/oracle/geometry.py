"""The fixed sizes of the formats and caches the shipped kernels use, each defined once.

Every module that needs one of these imports it from here (docs/spec.md, sections on block
scaling, layouts and the indexer op).
"""

from __future__ import annotations

GROUP = 32  # elements per MX block: one e8m0 scale byte each
HEAD_DIM = 128  # the indexer's head dimension (one K row)
ROPE_DIM = 64  # rotary dims of an indexer row (the first ROPE_DIM of HEAD_DIM)
ROW_BYTES = HEAD_DIM // 2  # packed E2M1 bytes per 128-element row: two nibbles a byte
ROW_GROUPS = HEAD_DIM // GROUP  # e8m0 bytes per 128-element row
TOKEN_BYTES = ROW_BYTES + ROW_GROUPS  # 68: one FP4 token with its scales (sglang page68, vLLM K cache)
KV_BLOCK = 64  # tokens per FP4 KV cache page (AITER's FP4 cache, the FP4 scorers' page)
TILE_K = 128  # dims per MFMA K step of the scorers and per k_tile of AITER's FP4 layouts
