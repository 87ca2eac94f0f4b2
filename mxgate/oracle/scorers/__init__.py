"""The paged MQA logits scorers: per call, the emulated order (the bit-exact target) and the
value with its rigorous bound (``ScoredLogits``); top-k's oracle choice and admissible range.

    common      the result type, the qk accumulation / bound model names, the input checks
    arithmetic  rounding real values once, head-summation orders, the rigorous bounds
    aiter_fp4   AITER pa_mqa_logits_fp4 decode and prefill (FlyDSL)
    aiter_fp8   AITER's FP8 paged scorer over the indexer's FP8 K cache
    sglang      sglang's FP4 index scorer (bf16 rounding points)
    vllm        vLLM PR #42908's ROCm Triton FP4 / FP8 scorers
    topk        the oracle's top-k and the admissible range a backend's choice is judged by
    cells       each window cell of a backend's logits classified (bit-equal to the emulated
                order, within the bound, the value's non-finite class, outside)
    choices     each row of a backend's top-k choice classified (near-tie swaps, genuine
                misses, invalid choices)

The gate (``mxgate.conformance.judge``: ``compare_logits``, ``check_topk``) and ``mxgate
identify`` both read ``cells`` and ``choices``; nothing here makes a verdict.
"""

from mxgate.oracle.scorers.aiter_fp4 import (
    pa_mqa_logits_fp4,
    pa_mqa_logits_fp4_prefill,
    pa_mqa_logits_fp4_prefill_scored,
    pa_mqa_logits_fp4_scored,
)
from mxgate.oracle.scorers.aiter_fp8 import pa_mqa_logits_fp8, pa_mqa_logits_fp8_scored
from mxgate.oracle.scorers.common import ScoredLogits
from mxgate.oracle.scorers.sglang import (
    fp4_index_logits_decode,
    fp4_index_logits_decode_scored,
    fp4_index_logits_paged,
    fp4_index_logits_paged_scored,
)
from mxgate.oracle.scorers.topk import topk_indices

__all__ = [
    "ScoredLogits",
    "fp4_index_logits_decode",
    "fp4_index_logits_decode_scored",
    "fp4_index_logits_paged",
    "fp4_index_logits_paged_scored",
    "pa_mqa_logits_fp4",
    "pa_mqa_logits_fp4_prefill",
    "pa_mqa_logits_fp4_prefill_scored",
    "pa_mqa_logits_fp4_scored",
    "pa_mqa_logits_fp8",
    "pa_mqa_logits_fp8_scored",
    "topk_indices",
]
